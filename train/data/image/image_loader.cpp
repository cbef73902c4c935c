// ImageLoader and channel_stats (train/data/image/image_loader.h).
//
// Batch k of an epoch holds positions [k*B, (k+1)*B) of the epoch's order, which is the Philox
// permutation keyed by (seed, epoch). The example at position p is augmented with the draws of
// Philox block p of the stream keyed by (seed, epoch, "augment"): word 0 picks the crop row
// offset, word 1 the column offset (both uniform in [0, 2*pad]), word 2's top bit the flip. The
// image is first resized (image_size), the crop is taken from it padded with zero pixels (before
// normalization, as torchvision's RandomCrop), and the flip mirrors the cropped image. Padding to
// pad_height x pad_width comes last, at the right and bottom, with 0 after normalization (our
// choice: the study's re-runs pad CIFAR to 35x35 for patch 7 without saying where or with what).
// So a batch's content depends only on (seed, epoch, k), never on which thread made it or when.
//
// Workers claim batch numbers in order from a shared counter, but only while the claimed batch
// is fewer than `prefetch` ahead of the one next() returns; finished batches wait in a map
// keyed by batch number, and next() takes them in order. A worker's exception travels in its
// batch's slot and is rethrown by next() when that batch is due.
#include "train/data/image/image_loader.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <map>
#include <numeric>

#include "tensor/philox.h"
#include "train/data/image/image_resize.h"
#include "train/data/shuffle.h"

namespace qkv::data {

namespace {

// Uniform in [0, n) from 32 random bits (multiply-shift).
int64_t uniform_below(uint32_t bits, int64_t n) { return int64_t((uint64_t(bits) * uint64_t(n)) >> 32); }

void check_options(const ImageDataset& data, const LoaderOptions& o) {
  const int64_t c = data.channels();
  check<ValueError>(o.batch_size >= 1, "ImageLoader: batch_size must be at least 1, got ", o.batch_size);
  check<ValueError>(o.workers >= 0, "ImageLoader: workers must be non-negative, got ", o.workers);
  check<ValueError>(o.prefetch >= 1, "ImageLoader: prefetch must be at least 1, got ", o.prefetch);
  check<ValueError>(o.crop_padding >= 0, "ImageLoader: crop_padding must be non-negative, got ", o.crop_padding);
  check<ValueError>(o.image_size >= 0, "ImageLoader: image_size must be non-negative, got ", o.image_size);
  const int64_t h = o.image_size > 0 ? o.image_size : data.height(), w = o.image_size > 0 ? o.image_size : data.width();
  check<ValueError>((o.pad_height == 0 || o.pad_height >= h) && (o.pad_width == 0 || o.pad_width >= w),
                    "ImageLoader: padding to ", o.pad_height, "x", o.pad_width, " would cut the ", h, "x", w,
                    " images of ", data.name());
  check<ValueError>(o.mean.empty() || int64_t(o.mean.size()) == c, "ImageLoader: mean has ", o.mean.size(),
                    " values, expected one per channel (", c, ") or none");
  check<ValueError>(o.std.empty() || int64_t(o.std.size()) == c, "ImageLoader: std has ", o.std.size(),
                    " values, expected one per channel (", c, ") or none");
  for (float s : o.std) check<ValueError>(s > 0, "ImageLoader: std values must be positive, got ", s);
}

// lut[c * 256 + v] = (v / 255 - mean[c]) / std[c].
std::vector<float> normalization_table(int64_t channels, const LoaderOptions& o) {
  std::vector<float> lut(size_t(channels * 256));
  for (int64_t c = 0; c < channels; ++c) {
    const float mean = o.mean.empty() ? 0.0f : o.mean[size_t(c)], sd = o.std.empty() ? 1.0f : o.std[size_t(c)];
    for (int v = 0; v < 256; ++v) lut[size_t(c * 256 + v)] = (float(v) / 255.0f - mean) / sd;
  }
  return lut;
}

struct Augment {
  int64_t oy = 0, ox = 0;  // crop offsets into the padded image, in [0, 2*pad]
  bool flip = false;
};

struct Slot {
  ImageBatch batch;
  std::exception_ptr error;
};

// A thread's buffers: the image as stored, and resized.
struct Scratch {
  std::vector<uint8_t> stored, resized;
};

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

}  // namespace

struct ImageLoader::Impl {
  std::shared_ptr<const ImageDataset> data;
  LoaderOptions opt;
  int64_t n, c, batches;
  int64_t sh, sw;  // the images as stored
  int64_t h, w;    // resized: what is cropped, flipped and normalized
  int64_t oh, ow;  // the batches' images: the resized ones padded
  bool resize;
  std::vector<float> lut;

  // The current epoch (set by start_epoch on the caller's thread, read-only while workers run).
  int64_t epoch = -1;
  std::vector<int64_t> order;
  uint64_t augment_key = 0;
  int64_t next_out = 0;  // the batch next() returns next
  Scratch scratch;       // workers == 0: the caller's buffers
  double waited = 0;

  // Shared with the workers, under `mu`.
  std::mutex mu;
  std::condition_variable ready_cv, space_cv;
  std::map<int64_t, Slot> done;
  int64_t next_claim = 0;
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;

  Impl(std::shared_ptr<const ImageDataset> d, LoaderOptions o) : data(std::move(d)), opt(std::move(o)) {
    check<ValueError>(data != nullptr, "ImageLoader: no dataset");
    check_options(*data, opt);
    n = data->size(), sh = data->height(), sw = data->width(), c = data->channels();
    h = opt.image_size > 0 ? opt.image_size : sh, w = opt.image_size > 0 ? opt.image_size : sw;
    resize = h != sh || w != sw;
    oh = std::max(h, opt.pad_height), ow = std::max(w, opt.pad_width);
    batches = opt.drop_last ? n / opt.batch_size : (n + opt.batch_size - 1) / opt.batch_size;
    lut = normalization_table(c, opt);
    scratch = make_scratch();
  }
  Scratch make_scratch() const {
    return {std::vector<uint8_t>(size_t(sh * sw * c)), std::vector<uint8_t>(size_t(h * w * c))};
  }
  ~Impl() { stop_workers(); }

  Augment draw(int64_t pos) const {
    const int64_t pad = opt.crop_padding;
    if (pad == 0 && !opt.horizontal_flip) return {};
    const philox::U32x4 r = philox::block(augment_key, uint64_t(pos));
    return {uniform_below(r.v[0], 2 * pad + 1), uniform_below(r.v[1], 2 * pad + 1),
            opt.horizontal_flip && (r.v[2] >> 31) != 0};
  }

  // Writes the h x w HWC `pixels`, cropped and flipped as `a` says and normalized, to `out` as
  // [C, oh, ow], zero past the image.
  void transform(const uint8_t* pixels, const Augment& a, float* out) const {
    const int64_t pad = opt.crop_padding;
    for (int64_t ch = 0; ch < c; ++ch) {
      const float* table = lut.data() + ch * 256;
      for (int64_t y = 0; y < oh; ++y) {
        float* dst = out + (ch * oh + y) * ow;
        std::fill(dst + (y < h ? w : 0), dst + ow, 0.0f);
        if (y >= h) continue;
        const int64_t sy = y + a.oy - pad;
        if (sy < 0 || sy >= h) {
          std::fill(dst, dst + w, table[0]);
          continue;
        }
        const uint8_t* row = pixels + sy * w * c + ch;
        for (int64_t x = 0; x < w; ++x) {
          const int64_t sx = (a.flip ? w - 1 - x : x) + a.ox - pad;
          dst[x] = (sx >= 0 && sx < w) ? table[row[sx * c]] : table[0];
        }
      }
    }
  }

  // Batch k of the current epoch; false when `stop` interrupted it.
  bool make_batch(int64_t k, ImageBatch& out, Scratch& buf) const {
    // This rank's rows of the batch (shard.h); draws keyed by the global position.
    const auto [lo, hi] = shard_rows(std::min(opt.batch_size, n - k * opt.batch_size), opt.shard);
    const int64_t first = k * opt.batch_size + lo, b = hi - lo;
    Tensor images = empty({b, c, oh, ow}, DType::f32), labels = empty({b}, DType::i64);
    float* img = images.data<float>();
    int64_t* lab = labels.data<int64_t>();
    for (int64_t j = 0; j < b; ++j) {
      if (stop.load(std::memory_order_relaxed)) return false;
      const int64_t index = order[size_t(first + j)];
      data->read(index, buf.stored.data());
      lab[j] = data->label(index);
      if (resize) resize_bilinear(buf.stored.data(), sh, sw, c, h, w, buf.resized.data());
      transform(resize ? buf.resized.data() : buf.stored.data(), draw(first + j), img + j * c * oh * ow);
    }
    out = {std::move(images), std::move(labels)};
    return true;
  }

  // Claims the next batch number when it is within `prefetch` of next_out; -1 when done.
  int64_t claim() {
    std::unique_lock<std::mutex> lock(mu);
    space_cv.wait(lock, [&] { return stop || next_claim >= batches || next_claim < next_out + opt.prefetch; });
    if (stop || next_claim >= batches) return -1;
    return next_claim++;
  }

  void worker_loop() {
    Scratch buf = make_scratch();
    for (int64_t k; (k = claim()) >= 0;) {
      Slot slot;
      try {
        if (!make_batch(k, slot.batch, buf)) return;
      } catch (...) { slot.error = std::current_exception(); }
      {
        std::lock_guard<std::mutex> lock(mu);
        done.emplace(k, std::move(slot));
      }
      ready_cv.notify_all();
    }
  }

  void stop_workers() {
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
    }
    space_cv.notify_all();
    for (std::thread& t : threads) t.join();
    threads.clear();
    std::lock_guard<std::mutex> lock(mu);
    done.clear();
    stop = false;
  }

  void start_epoch(int64_t e) {
    check<ValueError>(e >= 0, "ImageLoader::start_epoch: epoch must be non-negative, got ", e);
    stop_workers();
    epoch = e;
    order.resize(size_t(n));
    if (opt.shuffle) order = epoch_order(n, opt.seed, e);
    else std::iota(order.begin(), order.end(), int64_t(0));
    augment_key = stream_key(opt.seed, e, kAugmentStream);
    next_out = 0;
    next_claim = 0;
    const int64_t spawn = std::min<int64_t>(opt.workers, batches);
    for (int64_t t = 0; t < spawn; ++t) threads.emplace_back([this] { worker_loop(); });
  }

  // Waits for batch next_out from the workers and takes it.
  Slot take() {
    std::unique_lock<std::mutex> lock(mu);
    auto it = done.find(next_out);
    if (it == done.end()) {
      const auto t0 = Clock::now();
      ready_cv.wait(lock, [&] { return (it = done.find(next_out)) != done.end(); });
      waited += seconds_since(t0);
    }
    Slot slot = std::move(it->second);
    done.erase(it);
    ++next_out;
    lock.unlock();
    space_cv.notify_all();
    return slot;
  }

  // Without a start_epoch call, the first next() starts epoch 0. After a batch's exception the
  // epoch goes on with the next batch.
  bool next(ImageBatch& batch) {
    if (epoch < 0) start_epoch(0);
    if (next_out >= batches) return false;
    if (opt.workers == 0) {  // prepared here; the preparation time counts as waiting
      const auto t0 = Clock::now();
      const int64_t k = next_out++;
      try {
        make_batch(k, batch, scratch);
      } catch (...) {
        waited += seconds_since(t0);
        throw;
      }
      waited += seconds_since(t0);
      return true;
    }
    Slot slot = take();
    if (slot.error) std::rethrow_exception(slot.error);
    batch = std::move(slot.batch);
    return true;
  }
};

ImageLoader::ImageLoader(std::shared_ptr<const ImageDataset> data, LoaderOptions options)
    : impl_(std::make_unique<Impl>(std::move(data), std::move(options))) {}

ImageLoader::~ImageLoader() = default;

int64_t ImageLoader::batches_per_epoch() const { return impl_->batches; }
int64_t ImageLoader::height() const { return impl_->oh; }
int64_t ImageLoader::width() const { return impl_->ow; }
void ImageLoader::start_epoch(int64_t epoch) { impl_->start_epoch(epoch); }
bool ImageLoader::next(ImageBatch& batch) { return impl_->next(batch); }
double ImageLoader::wait_seconds() const { return impl_->waited; }

namespace {

// Per-channel sums of v and v^2 (pixel values 0..255) and the pixel count per channel.
struct ChannelSums {
  std::vector<uint64_t> sum, sq;
  uint64_t count = 0;
  explicit ChannelSums(int64_t c) : sum(size_t(c)), sq(size_t(c)) {}
  void add(const uint8_t* pixels, int64_t hw, int64_t c) {
    for (int64_t p = 0; p < hw; ++p)
      for (int64_t ch = 0; ch < c; ++ch) {
        const uint64_t v = pixels[p * c + ch];
        sum[size_t(ch)] += v;
        sq[size_t(ch)] += v * v;
      }
    count += uint64_t(hw);
  }
  void merge(const ChannelSums& o) {
    for (size_t ch = 0; ch < sum.size(); ++ch) sum[ch] += o.sum[ch], sq[ch] += o.sq[ch];
    count += o.count;
  }
};

}  // namespace

std::pair<std::vector<float>, std::vector<float>> channel_stats(const ImageDataset& data, int64_t max_examples) {
  const int64_t n = data.size(), m = std::min(n, max_examples), c = data.channels(), hw = data.height() * data.width();
  check<ValueError>(m >= 1, "channel_stats: ", data.name(), " has ", n, " examples and max_examples is ", max_examples,
                    ": nothing to measure");
  ChannelSums total(c);
  std::exception_ptr error;
#pragma omp parallel
  {
    ChannelSums local(c);
    std::vector<uint8_t> buf(size_t(hw * c));
#pragma omp for schedule(dynamic, 16)
    for (int64_t i = 0; i < m; ++i) {
      try {
        data.read(i * n / m, buf.data());  // m examples spread evenly over the dataset
        local.add(buf.data(), hw, c);
      } catch (...) {
#pragma omp critical(qkv_channel_stats)
        if (!error) error = std::current_exception();
      }
    }
#pragma omp critical(qkv_channel_stats)
    total.merge(local);
  }
  if (error) std::rethrow_exception(error);
  std::vector<float> mean(static_cast<size_t>(c)), sd(static_cast<size_t>(c));
  for (int64_t ch = 0; ch < c; ++ch) {
    const double mu = double(total.sum[size_t(ch)]) / double(total.count) / 255.0;
    const double ex2 = double(total.sq[size_t(ch)]) / double(total.count) / (255.0 * 255.0);
    mean[size_t(ch)] = float(mu);
    sd[size_t(ch)] = float(std::sqrt(std::max(0.0, ex2 - mu * mu)));
  }
  return {mean, sd};
}

}  // namespace qkv::data
