// What the image-data tests share: datasets and files built in memory (IDX, images with known
// pixels and labels, a dataset that fails on purpose), and the checks on what readers return.
#pragma once
#include <doctest/doctest.h>
#include <stb_image.h>
#include <stb_image_write.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <numeric>
#include <set>
#include <sstream>
#include <thread>

#include "tests/support/error_checks.h"
#include "tests/support/test_support.h"
#include "train/data/image/image_dataset.h"
#include "train/data/image/image_loader.h"

namespace qkv::test {

using namespace qkv::data;
namespace fs = std::filesystem;

// The message of the IOError that f throws, or a marker that matches no expectation.
template <class F> inline std::string io_error(F&& f) { return test::error_of<IOError>(std::forward<F>(f)); }

inline std::vector<int64_t> histogram(const ImageDataset& d) {
  std::vector<int64_t> h(size_t(d.classes()));
  for (int64_t i = 0; i < d.size(); ++i) ++h[size_t(d.label(i))];
  return h;
}

inline std::vector<uint8_t> pixels_of(const ImageDataset& d, int64_t i) {
  std::vector<uint8_t> p(size_t(d.height() * d.width() * d.channels()));
  d.read(i, p.data());
  return p;
}

inline void write_file(const fs::path& path, const std::vector<uint8_t>& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

inline void write_text(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

inline void write_gzip(const fs::path& path, const std::vector<uint8_t>& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  REQUIRE(gzwrite(f, bytes.data(), unsigned(bytes.size())) == int(bytes.size()));
  gzclose(f);
}

inline std::vector<uint8_t> read_bytes(const fs::path& path, size_t n) {
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> b(n);
  in.read(reinterpret_cast<char*>(b.data()), std::streamsize(n));
  REQUIRE(in.gcount() == std::streamsize(n));
  return b;
}

// An IDX file: big-endian magic and dimensions, then the payload.
inline std::vector<uint8_t> idx_file(uint32_t magic, std::vector<uint32_t> dims, std::vector<uint8_t> payload) {
  std::vector<uint8_t> out;
  auto put = [&](uint32_t v) {
    for (int s = 24; s >= 0; s -= 8) out.push_back(uint8_t(v >> s));
  };
  put(magic);
  for (uint32_t d : dims) put(d);
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

inline std::vector<uint8_t> iota_bytes(size_t n, uint8_t start = 0) {
  std::vector<uint8_t> b(n);
  std::iota(b.begin(), b.end(), start);
  return b;
}

// Captures what a call prints to std::cout.
template <class F> inline std::string captured_stdout(F&& f) {
  std::ostringstream s;
  std::streambuf* old = std::cout.rdbuf(s.rdbuf());
  try {
    f();
  } catch (...) {
    std::cout.rdbuf(old);
    throw;
  }
  std::cout.rdbuf(old);
  return s.str();
}

// A dataset of n images h x w x c with pixel(i, y, x, ch) and label(i), in memory.
template <class Pixel, class Label>
std::shared_ptr<MemoryImageDataset> make_dataset(int64_t n, int64_t h, int64_t w, int64_t c, int64_t classes,
                                                 Pixel pixel, Label label) {
  std::vector<uint8_t> px(size_t(n * h * w * c));
  std::vector<int64_t> labels(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    labels[size_t(i)] = label(i);
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x)
        for (int64_t ch = 0; ch < c; ++ch) px[size_t(((i * h + y) * w + x) * c + ch)] = uint8_t(pixel(i, y, x, ch));
  }
  return std::make_shared<MemoryImageDataset>("synthetic", from_vector(px, {n, h, w, c}), from_vector(labels), classes);
}

// Every batch of one epoch.
inline std::vector<ImageBatch> epoch_batches(ImageLoader& loader, int64_t epoch) {
  loader.start_epoch(epoch);
  std::vector<ImageBatch> out;
  for (ImageBatch b; loader.next(b);) out.push_back(b);
  return out;
}

inline std::vector<int64_t> epoch_labels(ImageLoader& loader, int64_t epoch) {
  std::vector<int64_t> labels;
  for (const ImageBatch& b : epoch_batches(loader, epoch))
    for (int64_t v : b.labels.to_vector<int64_t>()) labels.push_back(v);
  return labels;
}

// Wraps a dataset: read() sleeps, and throws IOError for one index.
class FaultyDataset : public ImageDataset {
 public:
  FaultyDataset(std::shared_ptr<const ImageDataset> base, int64_t bad, std::chrono::microseconds delay)
      : base_(std::move(base)), bad_(bad), delay_(delay) {}
  std::string name() const override { return "faulty"; }
  int64_t size() const override { return base_->size(); }
  int64_t height() const override { return base_->height(); }
  int64_t width() const override { return base_->width(); }
  int64_t channels() const override { return base_->channels(); }
  int64_t classes() const override { return base_->classes(); }
  int64_t label(int64_t i) const override { return base_->label(i); }
  void read(int64_t i, uint8_t* pixels) const override {
    if (delay_.count() > 0) std::this_thread::sleep_for(delay_);
    if (i == bad_) throw IOError(cat("broken example ", i));
    base_->read(i, pixels);
  }

 private:
  std::shared_ptr<const ImageDataset> base_;
  int64_t bad_;
  std::chrono::microseconds delay_;
};

inline bool is_gray(const std::vector<uint8_t>& rgb) {
  for (size_t p = 0; p < rgb.size(); p += 3)
    if (rgb[p] != rgb[p + 1] || rgb[p] != rgb[p + 2]) return false;
  return true;
}

// Example i of `data` is `file` decoded as one gray channel, repeated as R, G and B.
inline void check_promoted(const ImageDataset& data, int64_t i, const fs::path& file) {
  const std::vector<uint8_t> rgb = pixels_of(data, i);
  CHECK(is_gray(rgb));
  int w = 0, h = 0, comp = 0;
  uint8_t* gray = stbi_load(file.c_str(), &w, &h, &comp, 1);
  REQUIRE(gray != nullptr);
  int64_t mismatches = 0;
  for (int64_t p = 0; p < int64_t(w) * h; ++p) mismatches += rgb[size_t(p * 3)] != gray[p];
  stbi_image_free(gray);
  CHECK(mismatches == 0);
}

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace qkv::test
