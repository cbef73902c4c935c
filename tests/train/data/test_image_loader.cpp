// The threaded image loader (train/data/image/image_loader.h): every example once per epoch, the same
// batches whatever the thread count, per-epoch orders, normalization, augmentation, errors
// surfacing on the caller's thread, and prompt shutdown.
#include <doctest/doctest.h>

#include "tests/train/data/image_helpers.h"

using namespace qkv;
using namespace qkv::data;
using namespace qkv::test;

TEST_CASE("loader: batches cover every example exactly once per epoch, with a partial or dropped last batch") {
  const auto data = make_dataset(
      103, 2, 2, 1, 103, [](int64_t i, int64_t, int64_t, int64_t) { return i; }, [](int64_t i) { return i; });
  for (int workers : {0, 2}) {
    for (bool drop_last : {false, true}) {
      CAPTURE(workers);
      CAPTURE(drop_last);
      LoaderOptions o;
      o.batch_size = 10, o.workers = workers, o.drop_last = drop_last, o.seed = 5;
      ImageLoader loader(data, o);
      CHECK(loader.batches_per_epoch() == (drop_last ? 10 : 11));
      for (int64_t epoch : {0, 1}) {
        const std::vector<ImageBatch> batches = epoch_batches(loader, epoch);
        REQUIRE(int64_t(batches.size()) == loader.batches_per_epoch());
        CHECK(batches.back().labels.size(0) == (drop_last ? 10 : 3));
        std::vector<int64_t> labels;
        for (const ImageBatch& b : batches) {
          const std::vector<int64_t> l = b.labels.to_vector<int64_t>();
          const std::vector<float> x = b.images.to_vector<float>();
          for (size_t j = 0; j < l.size(); ++j) CHECK(x[j * 4] == doctest::Approx(l[j] / 255.0));  // pixels = label
          labels.insert(labels.end(), l.begin(), l.end());
        }
        std::vector<int64_t> sorted = labels;
        std::sort(sorted.begin(), sorted.end());
        CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end());  // no repeats
        CHECK(sorted.size() == (drop_last ? 100u : 103u));
        ImageBatch b;
        CHECK_FALSE(loader.next(b));  // the epoch is over, and stays over
        CHECK_FALSE(loader.next(b));
      }
    }
  }
}

TEST_CASE("loader: the same seed gives the same batches with 0, 1 and 3 workers") {
  const auto data = make_dataset(
      50, 6, 5, 3, 7,
      [](int64_t i, int64_t y, int64_t x, int64_t c) { return (i * 37 + y * 11 + x * 5 + c * 71) % 256; },
      [](int64_t i) { return i % 7; });
  auto run = [&](int workers, uint64_t seed) {
    LoaderOptions o;
    o.batch_size = 8, o.workers = workers, o.prefetch = 2, o.seed = seed, o.crop_padding = 2;
    o.horizontal_flip = true, o.mean = {0.5f, 0.4f, 0.3f}, o.std = {0.2f, 0.3f, 0.4f};
    ImageLoader loader(data, o);
    std::vector<std::vector<float>> out;
    for (int64_t epoch : {0, 1})
      for (const ImageBatch& b : epoch_batches(loader, epoch)) {
        out.push_back(b.images.to_vector<float>());
        const std::vector<int64_t> l = b.labels.to_vector<int64_t>();
        out.emplace_back(l.begin(), l.end());
      }
    return out;
  };
  const auto reference = run(0, 11);
  CHECK(reference.size() == 2 * 2 * 7u);
  CHECK(run(1, 11) == reference);
  CHECK(run(3, 11) == reference);
  CHECK(run(3, 12) != reference);
}

TEST_CASE("loader: epochs have different orders, an epoch repeats exactly, shuffle off keeps file order") {
  const auto data = make_dataset(
      64, 1, 1, 1, 64, [](int64_t, int64_t, int64_t, int64_t) { return 0; }, [](int64_t i) { return i; });
  LoaderOptions o;
  o.batch_size = 16, o.workers = 2, o.seed = 3;
  ImageLoader loader(data, o);
  const std::vector<int64_t> e0 = epoch_labels(loader, 0), e1 = epoch_labels(loader, 1), e2 = epoch_labels(loader, 2);
  std::vector<int64_t> identity(64);
  std::iota(identity.begin(), identity.end(), 0);
  CHECK(e0 != e1);
  CHECK(e1 != e2);
  CHECK(e0 != identity);
  CHECK(epoch_labels(loader, 0) == e0);
  o.shuffle = false;
  ImageLoader ordered(data, o);
  CHECK(epoch_labels(ordered, 0) == identity);
  CHECK(epoch_labels(ordered, 4) == identity);
}

TEST_CASE("loader: images come out [B, C, H, W] as (pixel/255 - mean[c]) / std[c]") {
  auto pixel = [](int64_t i, int64_t y, int64_t x, int64_t c) { return 10 * i + 40 * c + 7 * y + x; };
  const auto data = make_dataset(2, 2, 3, 3, 2, pixel, [](int64_t i) { return i; });
  LoaderOptions o;
  o.batch_size = 2, o.shuffle = false, o.workers = 1;
  o.mean = {0.1f, 0.2f, 0.3f}, o.std = {0.5f, 0.25f, 2.0f};
  ImageLoader loader(data, o);
  ImageBatch b;
  REQUIRE(loader.next(b));
  CHECK(b.images.shape() == Shape{2, 3, 2, 3});
  CHECK(b.images.dtype() == DType::f32);
  CHECK(b.labels.dtype() == DType::i64);
  const std::vector<float> x = b.images.to_vector<float>();
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t y = 0; y < 2; ++y)
        for (int64_t xx = 0; xx < 3; ++xx) {
          const double want = (pixel(i, y, xx, c) / 255.0 - o.mean[size_t(c)]) / o.std[size_t(c)];
          CHECK(x[size_t(((i * 3 + c) * 2 + y) * 3 + xx)] == doctest::Approx(want).epsilon(1e-6));
        }
  LoaderOptions bad = o;
  bad.std = {1.0f};
  CHECK_THROWS_AS(ImageLoader(data, bad), ValueError);
  bad = o;
  bad.std = {1.0f, 0.0f, 1.0f};
  CHECK_THROWS_AS(ImageLoader(data, bad), ValueError);
}

TEST_CASE("loader: horizontal flip mirrors about half of the examples") {
  const int64_t n = 200, h = 3, w = 4, c = 2;
  auto pixel = [](int64_t, int64_t y, int64_t x, int64_t ch) { return x * 40 + ch * 7 + y; };
  const auto data = make_dataset(n, h, w, c, 1, pixel, [](int64_t) { return 0; });
  LoaderOptions o;
  o.batch_size = 32, o.workers = 2, o.horizontal_flip = true, o.seed = 9;
  ImageLoader loader(data, o);
  int flipped = 0, plain = 0;
  for (const ImageBatch& b : epoch_batches(loader, 0)) {
    const std::vector<float> x = b.images.to_vector<float>();
    for (int64_t i = 0; i < b.images.size(0); ++i) {
      bool same = true, mirror = true;
      for (int64_t ch = 0; ch < c; ++ch)
        for (int64_t y = 0; y < h; ++y)
          for (int64_t xx = 0; xx < w; ++xx) {
            const float v = x[size_t(((i * c + ch) * h + y) * w + xx)];
            same = same && v == float(pixel(0, y, xx, ch)) / 255.0f;
            mirror = mirror && v == float(pixel(0, y, w - 1 - xx, ch)) / 255.0f;
          }
      flipped += mirror;
      plain += same;
    }
  }
  CHECK(flipped + plain == n);  // every output is the image or its mirror
  CHECK(flipped > 70);
  CHECK(flipped < 130);
}

TEST_CASE("loader: crop padding shifts the image inside a zero border") {
  const int64_t n = 200, side = 6, pad = 2;
  const auto data = make_dataset(
      n, side, side, 1, 1, [](int64_t, int64_t y, int64_t x, int64_t) { return 1 + y * side + x; },
      [](int64_t) { return 0; });
  LoaderOptions o;
  o.batch_size = 50, o.workers = 3, o.crop_padding = int(pad), o.seed = 1;
  ImageLoader loader(data, o);
  std::set<std::pair<int64_t, int64_t>> shifts;
  int consistent = 0;
  for (const ImageBatch& b : epoch_batches(loader, 0)) {
    const std::vector<float> x = b.images.to_vector<float>();
    for (int64_t i = 0; i < b.images.size(0); ++i) {
      const float* img = x.data() + i * side * side;
      // Output (y, x) shows source (y + dy, x + dx), zero outside the source: find dy, dx from
      // the first nonzero pixel, then check every pixel.
      const int64_t first = std::find_if(img, img + side * side, [](float v) { return v != 0; }) - img;
      REQUIRE(first < side * side);
      const int64_t src = std::lround(img[first] * 255.0f) - 1;
      const int64_t dy = src / side - first / side, dx = src % side - first % side;
      bool ok = std::abs(dy) <= pad && std::abs(dx) <= pad;
      for (int64_t y = 0; y < side; ++y)
        for (int64_t xx = 0; xx < side; ++xx) {
          const int64_t sy = y + dy, sx = xx + dx;
          const bool inside = sy >= 0 && sy < side && sx >= 0 && sx < side;
          const float want = inside ? float(1 + sy * side + sx) / 255.0f : 0.0f;
          ok = ok && img[y * side + xx] == want;
        }
      consistent += ok;
      shifts.insert({dy, dx});
    }
  }
  CHECK(consistent == n);
  CHECK(shifts.size() >= 20);  // of the 25 offsets in [-2, 2]^2
  CHECK(shifts.count({-2, -2}) + shifts.count({2, 2}) >= 1);

  // The border is a zero pixel, so after normalization it reads (0 - mean) / std.
  o.mean = {0.5f}, o.std = {0.5f}, o.shuffle = false;
  ImageLoader normalized(data, o);
  int border = 0;
  for (const ImageBatch& b : epoch_batches(normalized, 0))
    for (float v : b.images.to_vector<float>()) border += v == -1.0f;
  CHECK(border > 0);
}

TEST_CASE("loader: an exception in read() surfaces from next() on the caller's thread, in batch order") {
  const auto base = make_dataset(
      60, 2, 2, 1, 60, [](int64_t i, int64_t, int64_t, int64_t) { return i; }, [](int64_t i) { return i; });
  const auto faulty = std::make_shared<FaultyDataset>(base, 37, std::chrono::microseconds(0));
  for (int workers : {0, 1, 3}) {
    CAPTURE(workers);
    LoaderOptions o;
    o.batch_size = 10, o.shuffle = false, o.workers = workers;
    ImageLoader loader(faulty, o);
    ImageBatch b;
    for (int k = 0; k < 3; ++k) REQUIRE(loader.next(b));
    CHECK(b.labels.to_vector<int64_t>().front() == 20);
    check_contains(io_error([&] { loader.next(b); }), {"broken example 37"});
    REQUIRE(loader.next(b));  // the loader goes on with the next batch
    CHECK(b.labels.to_vector<int64_t>().front() == 40);
  }
}

TEST_CASE("loader: destroying it mid-epoch returns promptly, and wait_seconds counts stalls") {
  const auto base = make_dataset(
      100000, 2, 2, 1, 1, [](int64_t, int64_t, int64_t, int64_t) { return 1; }, [](int64_t) { return 0; });
  const auto slow = std::make_shared<FaultyDataset>(base, -1, std::chrono::microseconds(2000));
  LoaderOptions o;
  o.batch_size = 128, o.workers = 3, o.prefetch = 4;  // a batch takes one worker over 250 ms
  auto loader = std::make_unique<ImageLoader>(slow, o);
  const auto t0 = std::chrono::steady_clock::now();
  ImageBatch b;
  REQUIRE(loader->next(b));  // next() has to wait for the first batch
  REQUIRE(loader->next(b));
  const double waited = loader->wait_seconds(), elapsed = seconds_since(t0);
  CHECK(waited > 0.2);
  CHECK(waited <= elapsed + 1e-3);
  const auto t1 = std::chrono::steady_clock::now();
  loader.reset();  // workers are mid-batch: they must stop between examples, not finish the epoch
  CHECK(seconds_since(t1) < 0.1);

  loader = std::make_unique<ImageLoader>(slow, o);
  loader->start_epoch(3);  // workers busy, nothing taken
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const auto t2 = std::chrono::steady_clock::now();
  loader.reset();
  CHECK(seconds_since(t2) < 0.1);
}
