// The official language-model data protocol: TokenBatches' `official` sampling (one document per
// row without its separator, cut to context+1 and padded with end-of-text, context-1 counted
// targets, padding counted) on hand-built token folders, and `data prepare` with validation
// files apart from the training files (dataset.json records them; no fraction cut).
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "tests/support/byte_tokenizer.h"
#include "tests/support/error_checks.h"
#include "tests/support/test_support.h"
#include "tests/support/token_data.h"
#include "train/data/tokens/token_dataset.h"

using namespace qkv;
using namespace qkv::data;
namespace fs = std::filesystem;

namespace {

using Rows = std::vector<std::vector<int64_t>>;

Rows rows(const Tensor& t) {
  const std::vector<int64_t> v = t.to_vector<int64_t>();
  Rows out;
  for (int64_t b = 0; b < t.size(0); ++b) out.emplace_back(v.begin() + b * t.size(1), v.begin() + (b + 1) * t.size(1));
  return out;
}

// What the official code trains on for one document (its tokens without a separator): the
// document cut to T+1 and right-padded with `eot`; inputs its first T tokens.
std::vector<int64_t> official_inputs(const std::vector<int64_t>& doc, int64_t T, int64_t eot) {
  std::vector<int64_t> s(doc.begin(), doc.begin() + std::min<int64_t>(int64_t(doc.size()), T + 1));
  s.resize(size_t(T + 1), eot);
  return {s.begin(), s.begin() + T};
}

// Every token of a prepared split, its shards in order.
std::vector<int32_t> tokens_of(const PreparedSplit& split) {
  std::vector<int32_t> out;
  for (const ShardFile& f : split.shards) {
    const TokenShard shard = read_token_shard(f.path);
    out.insert(out.end(), shard.data(), shard.data() + shard.size());
  }
  return out;
}

}  // namespace

TEST_CASE("official sampling: documents without a separator, cut to context+1, padded, context-1 targets counted") {
  test::TempDir tmp("lm-official");
  const int32_t E = 999;
  const int64_t T = 6, I = kIgnoreTarget;
  // The split opens mid-document (no separator), then: shorter than T+1, exactly T+1, longer,
  // empty; shards split documents.
  const std::vector<std::vector<int64_t>> docs = {
      {7, 8}, {1, 2, 3}, {10, 11, 12, 13, 14, 15, 16}, {20, 21, 22, 23, 24, 25, 26, 27, 28, 29}, {}};
  std::vector<int32_t> stream;
  for (size_t d = 0; d < docs.size(); ++d) {
    if (d > 0) stream.push_back(E);
    for (int64_t t : docs[d]) stream.push_back(int32_t(t));
  }
  test::write_dataset(tmp.path,
                      {{"train", {{stream.begin(), stream.begin() + 9}, {stream.begin() + 9, stream.end()}}},
                       {"val", {{5, 6, 7}}}},
                      1000, E);
  TokenBatchOptions o;
  o.batch = int64_t(docs.size());
  o.context = T;
  o.sampling = LmSampling::official;
  o.shuffle = false;
  o.loss_on_padding = false;  // not the official mode's business: padding is counted anyway
  TokenBatches b(tmp.path, "train", o);
  REQUIRE(b.windows_per_epoch() == int64_t(docs.size()));
  Tensor x, y;
  b.next(x, y);
  CHECK(x.shape() == Shape{int64_t(docs.size()), T});
  const Rows xs = rows(x), ys = rows(y);
  for (size_t d = 0; d < docs.size(); ++d) {
    INFO("document ", d);
    CHECK(xs[d] == official_inputs(docs[d], T, E));
    if (!docs[d].empty()) CHECK(xs[d][0] == docs[d][0]);  // no separator in front
    // Labels are the inputs shifted by one: the (T+1)-th token is never a target.
    for (int64_t j = 0; j + 1 < T; ++j) CHECK(ys[d][size_t(j)] == xs[d][size_t(j + 1)]);
    CHECK(ys[d][size_t(T - 1)] == I);
    CHECK(std::count(ys[d].begin(), ys[d].end(), I) == 1);  // T-1 counted, padding included
  }
  // The padding is counted: the short document's targets end in end-of-text tokens.
  CHECK(ys[1] == std::vector<int64_t>{2, 3, E, E, E, I});
  CHECK(ys[4] == std::vector<int64_t>{E, E, E, E, E, I});

  // The default per-document mode on the same data: from the separator, T targets, padding masked.
  o.sampling = LmSampling::per_document;
  TokenBatches p(tmp.path, "train", o);
  p.next(x, y);
  CHECK(rows(x)[1] == std::vector<int64_t>{E, 1, 2, 3, E, E});
  CHECK(rows(y)[1] == std::vector<int64_t>{1, 2, 3, E, I, I});

  // A context of 1 leaves nothing to predict.
  o.sampling = LmSampling::official;
  o.context = 1;
  test::check_contains(test::error_of<ValueError>([&] { TokenBatches(tmp.path, "train", o); }),
                       {"official", "context must be at least 2"});
  CHECK(parse_lm_sampling("official") == LmSampling::official);
  CHECK(std::string(lm_sampling_name(LmSampling::official)) == "official");
  test::check_contains(test::error_of<ValueError>([] { parse_lm_sampling("offical"); }), {"packed", "official"});
}

TEST_CASE("data prepare: --val files are the whole val split, recorded so prepare_once notices changes") {
  test::TempDir tmp("prepare-val");
  PrepareOptions o;
  o.inputs = {tmp.write("a.txt", "abc"), tmp.write("b.jsonl", "{\"text\": \"de\"}\n{\"text\": \"f\"}\n")};
  o.val_inputs = {tmp.write("v.jsonl", "{\"text\": \"xy\"}\n{\"text\": \"z\"}\n")};
  o.tokenizer = test::byte_tokenizer(tmp.path / "tok");
  o.out = tmp.path / "tokens";
  o.val_fraction = 0;
  o.shard_tokens = 4;
  o.progress = false;
  const PrepareResult r = prepare_dataset(o, nullptr);
  const int32_t E = test::kByteEot;
  CHECK(tokens_of(r.train) == std::vector<int32_t>{E, 'a', 'b', 'c', E, 'd', 'e', E, 'f'});
  CHECK(tokens_of(r.val) == std::vector<int32_t>{E, 'x', 'y', E, 'z'});
  const nlohmann::json info = nlohmann::json::parse(test::read_file(o.out / "dataset.json"));
  REQUIRE(info["val_inputs"].size() == 1);
  CHECK(info["val_inputs"][0]["path"] == fs::absolute(o.val_inputs[0]).lexically_normal().string());
  CHECK(info["val_inputs"][0]["documents"] == 2);
  CHECK(info["inputs"].size() == 2);

  // The official sampling over the val split: its first document, no separator.
  TokenBatchOptions tb;
  tb.batch = 2;
  tb.context = 3;
  tb.sampling = LmSampling::official;
  tb.shuffle = false;
  TokenBatches val(o.out, "val", tb);
  Tensor x, y;
  val.next(x, y);
  CHECK(rows(x) == Rows{{'x', 'y', E}, {'z', E, E}});

  // Up to date: nothing rewritten. A changed validation file prepares again.
  const auto stamp = fs::last_write_time(o.out / "dataset.json");
  CHECK(prepare_once(o, nullptr) == o.out);
  CHECK(fs::last_write_time(o.out / "dataset.json") == stamp);
  test::write_file(o.val_inputs[0], "{\"text\": \"uvw\"}\n");
  prepare_once(o, nullptr);
  CHECK(read_dataset_info(o.out).split("val").tokens == 4);
  // Without the validation files the recorded preparation no longer matches either.
  PrepareOptions cut = o;
  cut.val_inputs.clear();
  cut.val_fraction = 0.25;
  prepare_once(cut, nullptr);
  CHECK(read_dataset_info(o.out).split("train").tokens + read_dataset_info(o.out).split("val").tokens == 9);

  // Refused before anything is written: both a fraction and files, a file in both lists, and
  // validation files without a document.
  PrepareOptions e = o;
  e.val_fraction = 0.1;
  test::check_contains(test::error_of<ValueError>([&] { prepare_dataset(e, nullptr); }), {"--val-fraction", "--val"});
  e = o;
  e.val_inputs = {o.inputs[1]};
  test::check_contains(test::error_of<ValueError>([&] { prepare_dataset(e, nullptr); }),
                       {o.inputs[1].string(), "both a training input and a --val input"});
  e = o;
  e.val_inputs = {tmp.write("empty.jsonl", "")};
  test::check_contains(test::error_of<ValueError>([&] { prepare_dataset(e, nullptr); }),
                       {"hold no documents", (tmp.path / "empty.jsonl").string()});
}

TEST_CASE("data prepare: token budgets keep the first tokens of each split and stop reading there") {
  test::TempDir tmp("prepare-budget");
  PrepareOptions o;
  o.inputs = {tmp.write("a.txt", "abc"), tmp.write("b.jsonl", "{\"text\": \"de\"}\n{\"text\": \"f\"}\n"),
              tmp.write("c.txt", "ghij")};
  o.val_inputs = {tmp.write("v.jsonl", "{\"text\": \"xy\"}\n{\"text\": \"z\"}\n"), tmp.write("w.txt", "uvw")};
  o.tokenizer = test::byte_tokenizer(tmp.path / "tok");
  o.out = tmp.path / "tokens";
  o.val_fraction = 0;
  o.shard_tokens = 4;
  o.progress = false;
  o.max_tokens = 6;  // cuts the second input's first document
  o.val_max_tokens = 4;
  const PrepareResult r = prepare_dataset(o, nullptr);
  const int32_t E = test::kByteEot;
  CHECK(tokens_of(r.train) == std::vector<int32_t>{E, 'a', 'b', 'c', E, 'd'});
  CHECK(tokens_of(r.val) == std::vector<int32_t>{E, 'x', 'y', E});
  const nlohmann::json info = nlohmann::json::parse(test::read_file(o.out / "dataset.json"));
  CHECK(info["max_tokens"] == 6);
  CHECK(info["val_max_tokens"] == 4);
  REQUIRE(info["inputs"].size() == 3);
  CHECK(info["inputs"][2]["documents"] == 0);  // the budget was met before c.txt: not read
  REQUIRE(info["val_inputs"].size() == 2);
  CHECK(info["val_inputs"][1]["documents"] == 0);

  // Another budget is another preparation; the same one is up to date.
  const auto stamp = fs::last_write_time(o.out / "dataset.json");
  CHECK(prepare_once(o, nullptr) == o.out);
  CHECK(fs::last_write_time(o.out / "dataset.json") == stamp);
  PrepareOptions more = o;
  more.max_tokens = 0;
  prepare_once(more, nullptr);
  CHECK(read_dataset_info(o.out).split("train").tokens == 14);

  // A budget needs --val files; budgets are not negative.
  PrepareOptions e = o;
  e.val_inputs.clear();
  e.val_fraction = 0.1;
  test::check_contains(test::error_of<ValueError>([&] { prepare_dataset(e, nullptr); }), {"--max-tokens", "--val"});
  e = o;
  e.val_max_tokens = -1;
  test::check_contains(test::error_of<ValueError>([&] { prepare_dataset(e, nullptr); }), {"must not be negative"});
}
