// TokenBatches (train/data/tokens/token_batches.h) over token folders written here: every window once
// per epoch and reproducibly, resuming from a cursor, per-document samples padded with their
// padding ignored, and errors naming the dataset, split and shard.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "tests/support/error_checks.h"
#include "tests/support/test_support.h"
#include "tests/support/token_data.h"
#include "train/data/tokens/token_dataset.h"

using namespace qkv;
using namespace qkv::data;
namespace fs = std::filesystem;

namespace {

using test::check_contains;
using test::error_of;
using test::TempDir;
using test::write_dataset;
using test::write_file;

// Rows of a [B, T] int64 tensor.
std::vector<std::vector<int64_t>> rows(const Tensor& t) {
  const std::vector<int64_t> v = t.to_vector<int64_t>();
  std::vector<std::vector<int64_t>> out;
  for (int64_t b = 0; b < t.size(0); ++b) out.emplace_back(v.begin() + b * t.size(1), v.begin() + (b + 1) * t.size(1));
  return out;
}

}  // namespace

TEST_CASE("token batches: packed windows cover every window once per epoch, reproducibly") {
  TempDir tmp;
  // Tokens 0..999 in three shards of uneven size: windows straddle shard boundaries.
  std::vector<std::vector<int32_t>> shards(3);
  for (int32_t i = 0; i < 1000; ++i) shards[i < 300 ? 0 : i < 700 ? 1 : 2].push_back(i);
  write_dataset(tmp.path, {{"train", shards}, {"val", {{1, 2, 3}}}}, 1000, 999);
  TokenBatchOptions o;
  o.batch = 5;
  o.context = 7;
  o.seed = 11;
  TokenBatches b(tmp.path, "train", o);
  CHECK(b.tokens() == 1000);
  CHECK(b.windows_per_epoch() == 142);  // (1000 - 1) / 7

  std::vector<int64_t> starts;
  while (starts.size() < 142 * 2) {
    Tensor x, y;
    b.next(x, y);
    CHECK(x.dtype() == DType::i64);
    CHECK(x.shape() == Shape{5, 7});
    CHECK(y.shape() == Shape{5, 7});
    const auto xs = rows(x), ys = rows(y);
    for (size_t r = 0; r < xs.size(); ++r) {
      CHECK(xs[r][0] % 7 == 0);
      for (int64_t j = 0; j < 7; ++j) {
        CHECK(xs[r][size_t(j)] == xs[r][0] + j);
        CHECK(ys[r][size_t(j)] == xs[r][0] + j + 1);
      }
      starts.push_back(xs[r][0]);
    }
  }
  std::vector<int64_t> e0(starts.begin(), starts.begin() + 142), e1(starts.begin() + 142, starts.begin() + 284);
  std::vector<int64_t> all;
  for (int64_t w = 0; w < 142; ++w) all.push_back(w * 7);
  CHECK(e0 != all);  // shuffled
  CHECK(e0 != e1);   // reshuffled per epoch
  std::sort(e0.begin(), e0.end());
  std::sort(e1.begin(), e1.end());
  CHECK(e0 == all);
  CHECK(e1 == all);
  CHECK(b.cursor() == TokenCursor{2, 1});  // 57 batches of 5: two epochs of 142 and one more

  // Same seed, same order; another seed, another order; no shuffle, file order.
  TokenBatches same(tmp.path, "train", o);
  o.seed = 12;
  TokenBatches other(tmp.path, "train", o);
  o.shuffle = false;
  TokenBatches plain(tmp.path, "train", o);
  Tensor x1, y1, x2, y2, x3, y3;
  same.next(x1, y1);
  other.next(x2, y2);
  plain.next(x3, y3);
  std::vector<int64_t> same_firsts;
  for (const auto& r : rows(x1)) same_firsts.push_back(r[0]);
  CHECK(same_firsts == std::vector<int64_t>(starts.begin(), starts.begin() + 5));
  CHECK(x1.to_vector<int64_t>() != x2.to_vector<int64_t>());
  std::vector<int64_t> firsts;
  for (const auto& r : rows(x3)) firsts.push_back(r[0]);
  CHECK(firsts == std::vector<int64_t>{0, 7, 14, 21, 28});
}

TEST_CASE("token batches: seek(cursor) resumes exactly the same batches") {
  TempDir tmp;
  std::vector<int32_t> t;
  for (int32_t i = 0; i < 500; ++i) t.push_back(i % 45 == 0 ? 999 : (i * 37) % 997);  // 12 documents
  write_dataset(tmp.path, {{"train", {t}}}, 1000, 999);
  for (LmSampling sampling : {LmSampling::packed, LmSampling::per_document}) {
    TokenBatchOptions o;
    o.batch = 3;
    o.context = 16;
    o.sampling = sampling;
    o.seed = 5;
    TokenBatches a(tmp.path, "train", o);
    // Run past an epoch boundary (31 windows / 12 documents per epoch), saving a cursor midway.
    TokenCursor saved;
    std::vector<std::vector<int64_t>> after;
    for (int step = 0; step < 30; ++step) {
      if (step == 13) saved = a.cursor();
      Tensor x, y;
      a.next(x, y);
      if (step >= 13) {
        after.push_back(x.to_vector<int64_t>());
        after.push_back(y.to_vector<int64_t>());
      }
    }
    CHECK(a.cursor().epoch >= 1);
    TokenBatches b(tmp.path, "train", o);
    b.seek(saved);
    CHECK(b.cursor() == saved);
    for (size_t k = 0; k < after.size(); k += 2) {
      Tensor x, y;
      b.next(x, y);
      CHECK(x.to_vector<int64_t>() == after[k]);
      CHECK(y.to_vector<int64_t>() == after[k + 1]);
    }
    CHECK(b.cursor() == a.cursor());
  }
  TokenBatches c(tmp.path, "train", TokenBatchOptions{});
  check_contains(error_of<ValueError>([&] { c.seek({0, c.windows_per_epoch()}); }), {"index", "outside"});
  check_contains(error_of<ValueError>([&] { c.seek({-1, 0}); }), {"epoch"});
}

TEST_CASE("token batches: per-document samples are padded and their padding ignored") {
  TempDir tmp;
  const int32_t E = 999;
  // Documents: [E 1 2 3], [E 4..13] (longer than a sample), [E] (empty), [E 20]; and a val split
  // that starts in the middle of a document.
  std::vector<int32_t> stream = {E, 1, 2, 3, E, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, E, E, 20};
  write_dataset(tmp.path,
                {{"train",
                  {std::vector<int32_t>(stream.begin(), stream.begin() + 7),
                   std::vector<int32_t>(stream.begin() + 7, stream.end())}},
                 {"val", {{5, 6, E, 7}}}},
                1000, E);
  TokenBatchOptions o;
  o.batch = 4;
  o.context = 6;
  o.sampling = LmSampling::per_document;
  o.shuffle = false;
  TokenBatches b(tmp.path, "train", o);
  CHECK(b.windows_per_epoch() == 4);
  CHECK(b.eot() == E);
  Tensor x, y;
  b.next(x, y);
  const int64_t I = kIgnoreTarget;
  using Rows = std::vector<std::vector<int64_t>>;
  CHECK(rows(x) == Rows{{E, 1, 2, 3, E, E}, {E, 4, 5, 6, 7, 8}, {E, E, E, E, E, E}, {E, 20, E, E, E, E}});
  CHECK(rows(y) == Rows{{1, 2, 3, E, I, I}, {4, 5, 6, 7, 8, 9}, {E, I, I, I, I, I}, {20, E, I, I, I, I}});

  o.loss_on_padding = true;
  TokenBatches p(tmp.path, "train", o);
  p.next(x, y);
  CHECK(rows(y) == Rows{{1, 2, 3, E, E, E}, {4, 5, 6, 7, 8, 9}, {E, E, E, E, E, E}, {20, E, E, E, E, E}});

  o.loss_on_padding = false;
  o.batch = 2;
  TokenBatches v(tmp.path, "val", o);
  CHECK(v.windows_per_epoch() == 2);
  v.next(x, y);
  CHECK(rows(x) == Rows{{5, 6, E, E, E, E}, {E, 7, E, E, E, E}});
  CHECK(rows(y) == Rows{{6, E, I, I, I, I}, {7, E, I, I, I, I}});
}

TEST_CASE("token batches: errors name the dataset, split and shard") {
  TempDir tmp;
  check_contains(error_of<IOError>([&] { TokenBatches(tmp.path, "train", TokenBatchOptions{}); }),
                 {(tmp.path / "dataset.json").string(), "cannot open"});
  write_dataset(tmp.path, {{"train", {{1, 2, 3, 4, 5}}}}, 10, 9);
  check_contains(error_of<ValueError>([&] { TokenBatches(tmp.path, "val", TokenBatchOptions{}); }),
                 {"no split 'val'", "train"});
  TokenBatchOptions o;
  o.context = 8;
  check_contains(error_of<ValueError>([&] { TokenBatches(tmp.path, "train", o); }),
                 {"split 'train'", "5 tokens", "context + 1 = 9"});
  o.context = 0;
  check_contains(error_of<ValueError>([&] { TokenBatches(tmp.path, "train", o); }), {"context must be at least 1"});
  // dataset.json and the shard disagree.
  write_token_shard(tmp.path / "train_000000.bin", std::vector<int32_t>{1, 2, 3}, 10);
  check_contains(error_of<IOError>([&] { TokenBatches(tmp.path, "train", TokenBatchOptions{}); }),
                 {"train_000000.bin", "holds 3 tokens", "lists 5"});
  fs::remove(tmp.path / "train_000000.bin");
  check_contains(error_of<IOError>([&] { TokenBatches(tmp.path, "train", TokenBatchOptions{}); }),
                 {"train_000000.bin", "cannot open"});
  write_file(tmp.path / "dataset.json", "{\"tokenizer\": {\"vocab_size\": 10}}");
  check_contains(error_of<IOError>([&] { TokenBatches(tmp.path, "train", TokenBatchOptions{}); }),
                 {"dataset.json", "tokenizer.eot"});
  write_file(tmp.path / "dataset.json",
             "{\"tokenizer\": {\"vocab_size\": 10, \"eot\": 9}, \"splits\": {\"train\": {\"tokens\": 1, "
             "\"shards\": [{\"file\": \"../x.bin\", \"tokens\": 1}]}}}");
  check_contains(error_of<IOError>([&] { TokenBatches(tmp.path, "train", TokenBatchOptions{}); }),
                 {"dataset.json", "splits.train.shards[0].file"});
}
