// The one shuffle (train/data/shuffle.h) and the batch sources that use it: an epoch's order is a
// permutation that depends on (n, seed, epoch) alone, and TensorBatches, the image loader and
// TokenBatches all serve their samples in it.
#include <doctest/doctest.h>

#include <numeric>
#include <set>

#include "autograd/ops.h"
#include "tests/support/test_support.h"
#include "tests/support/token_data.h"
#include "train/data/batches.h"
#include "train/data/image/image_dataset.h"
#include "train/data/image/image_loader.h"
#include "train/data/shuffle.h"
#include "train/data/tokens/token_batches.h"

using namespace qkv;
using namespace qkv::data;

TEST_CASE("shuffle: an epoch's order is a permutation fixed by n, seed and epoch") {
  const std::vector<int64_t> a = epoch_order(1000, 7, 0);
  std::vector<int64_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> identity(1000);
  std::iota(identity.begin(), identity.end(), 0);
  CHECK(sorted == identity);
  CHECK(epoch_order(1000, 7, 0) == a);
  CHECK(epoch_order(1000, 7, 1) != a);
  CHECK(epoch_order(1000, 8, 0) != a);
  CHECK(epoch_order(1000, 7, 0) != identity);
  CHECK(epoch_order(0, 7, 0).empty());
  CHECK(stream_key(7, 0, kShuffleStream) != stream_key(7, 0, kAugmentStream));
}

TEST_CASE("shuffle: tensors, images and token windows come in the epoch's order") {
  const int64_t n = 40;
  std::vector<int64_t> ids(static_cast<size_t>(n));
  std::iota(ids.begin(), ids.end(), int64_t(0));
  // Tensors in memory: example i holds i.
  TensorBatches tensors({from_vector(ids, {n}), from_vector(ids, {n})}, n, true, 11);
  for (int64_t epoch : {0, 3}) {
    tensors.start_epoch(epoch);
    Tensor x, y;
    REQUIRE(tensors.next(x, y));
    CHECK(x.to_vector<int64_t>() == epoch_order(n, 11, epoch));
  }
  // Images: example i has label i % 10 and pixel value i.
  std::vector<uint8_t> pixels(static_cast<size_t>(n));
  std::vector<int64_t> labels(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) pixels[size_t(i)] = uint8_t(i), labels[size_t(i)] = i % 10;
  auto images =
      std::make_shared<MemoryImageDataset>("ids", from_vector(pixels, {n, 1, 1, 1}), from_vector(labels, {n}), 10);
  LoaderOptions o;
  o.batch_size = n;
  o.seed = 11;
  o.workers = 0;
  ImageLoader loader(images, o);
  loader.start_epoch(2);
  ImageBatch b;
  REQUIRE(loader.next(b));
  std::vector<int64_t> seen;
  for (float v : b.images.to_vector<float>()) seen.push_back(int64_t(std::lround(v * 255.0f)));
  CHECK(seen == epoch_order(n, 11, 2));
  // Token windows: window w of 4 tokens starts at token 4w, which holds w.
  test::TempDir dir;
  std::vector<int32_t> tokens;
  for (int32_t w = 0; w <= n; ++w)
    for (int j = 0; j < 4; ++j) tokens.push_back(j == 0 ? w : 99);
  test::write_dataset(dir.path, {{"train", {tokens}}}, 100, 99);
  TokenBatchOptions to;
  to.batch = n;
  to.context = 4;
  to.seed = 11;
  TokenBatches windows(dir.path, "train", to);
  REQUIRE(windows.windows_per_epoch() == n);
  windows.seek({1, 0});
  Tensor x, y;
  windows.next(x, y);
  std::vector<int64_t> firsts;
  for (int64_t r = 0; r < n; ++r) firsts.push_back(x.select(0, r).select(0, 0).item<int64_t>());
  CHECK(firsts == epoch_order(n, 11, 1));
}
