// Data-parallel shards (train/data/shard.h): over the ranks, every batch's rows are served once,
// in the single process's order, by TensorBatches, the image loader and TokenBatches alike.
#include <doctest/doctest.h>

#include <numeric>

#include "autograd/ops.h"
#include "tests/support/test_support.h"
#include "tests/support/token_data.h"
#include "train/data/batches.h"
#include "train/data/image/image_dataset.h"
#include "train/data/image/image_loader.h"
#include "train/data/shard.h"
#include "train/data/tokens/token_batches.h"

using namespace qkv;
using namespace qkv::data;

TEST_CASE("shard: the ranks' rows tile a batch in order, the first ranks taking the remainder") {
  for (int64_t n : {0, 1, 5, 64, 65, 1001})
    for (int world : {1, 2, 3, 8}) {
      int64_t next = 0, smallest = n, largest = 0;
      for (int r = 0; r < world; ++r) {
        const auto [first, end] = shard_rows(n, {r, world});
        CHECK(first == next);
        next = end;
        smallest = std::min(smallest, end - first);
        largest = std::max(largest, end - first);
      }
      CHECK(next == n);
      CHECK(largest - smallest <= 1);
    }
  CHECK(shard_rows(5, {0, 2}) == std::pair<int64_t, int64_t>{0, 3});
  CHECK(shard_rows(5, {1, 2}) == std::pair<int64_t, int64_t>{3, 5});
}

namespace {
std::vector<int64_t> ids(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), int64_t(0));
  return v;
}
}  // namespace

TEST_CASE("shard: tensor batches of three ranks serve each batch of one process, split") {
  const int64_t n = 50, batch = 16;  // batches of 16, 16, 16 and 2: the last leaves rank 2 empty
  const LabelledData data{from_vector(ids(n), {n}), from_vector(ids(n), {n})};
  TensorBatches whole(data, batch, true, 3);
  std::vector<std::unique_ptr<TensorBatches>> ranks;
  for (int r = 0; r < 3; ++r) ranks.push_back(std::make_unique<TensorBatches>(data, batch, true, 3, Shard{r, 3}));
  for (int64_t epoch : {0, 1}) {
    whole.start_epoch(epoch);
    for (auto& s : ranks) s->start_epoch(epoch);
    Tensor x, y;
    int64_t batches = 0;
    while (whole.next(x, y)) {
      std::vector<int64_t> joined;
      for (auto& s : ranks) {
        Tensor xr, yr;
        REQUIRE(s->next(xr, yr));
        for (int64_t v : xr.to_vector<int64_t>()) joined.push_back(v);
        CHECK(xr.to_vector<int64_t>() == yr.to_vector<int64_t>());
      }
      CHECK(joined == x.to_vector<int64_t>());
      ++batches;
    }
    CHECK(batches == 4);
    for (auto& s : ranks) {
      Tensor xr, yr;
      CHECK_FALSE(s->next(xr, yr));  // every rank ends the epoch together
    }
  }
}

TEST_CASE("shard: the image loader's ranks serve the rows (and augmentation) of one process") {
  const int64_t n = 21;
  std::vector<uint8_t> pixels;
  for (int64_t i = 0; i < n; ++i)
    for (int j = 0; j < 16; ++j) pixels.push_back(uint8_t(i * 10 + j));
  auto images = std::make_shared<MemoryImageDataset>("ids", from_vector(pixels, {n, 4, 4, 1}), from_vector(ids(n), {n}),
                                                     int64_t(n));
  LoaderOptions o;
  o.batch_size = 8;
  o.seed = 5;
  o.workers = 0;
  o.crop_padding = 1;  // random crops keyed by the global position
  o.horizontal_flip = true;
  ImageLoader whole(images, o);
  o.shard = {0, 2};
  ImageLoader rank0(images, o);
  o.shard = {1, 2};
  ImageLoader rank1(images, o);
  for (auto* l : {&whole, &rank0, &rank1}) l->start_epoch(1);
  ImageBatch b, b0, b1;
  while (whole.next(b)) {
    REQUIRE(rank0.next(b0));
    REQUIRE(rank1.next(b1));
    CHECK(concat({b0.images, b1.images}).to_vector<float>() == b.images.to_vector<float>());
    CHECK(concat({b0.labels, b1.labels}).to_vector<int64_t>() == b.labels.to_vector<int64_t>());
  }
}

TEST_CASE("shard: token batches of two ranks hold the rows of one process's batch") {
  test::TempDir dir;
  const auto tokens = test::markov_token_dataset(dir.path, 64);
  TokenBatchOptions o;
  o.batch = 6;
  o.context = 8;
  o.seed = 2;
  TokenBatches whole(tokens, "train", o);
  o.shard = {0, 2};
  TokenBatches rank0(tokens, "train", o);
  o.shard = {1, 2};
  TokenBatches rank1(tokens, "train", o);
  for (int step = 0; step < 3; ++step) {
    Tensor x, y, x0, y0, x1, y1;
    whole.next(x, y);
    rank0.next(x0, y0);
    rank1.next(x1, y1);
    CHECK(x0.size(0) == 3);
    CHECK(concat({x0, x1}).to_vector<int64_t>() == x.to_vector<int64_t>());
    CHECK(concat({y0, y1}).to_vector<int64_t>() == y.to_vector<int64_t>());
    CHECK(rank0.cursor() == whole.cursor());  // a checkpoint's cursor is the same on every rank
  }
}
