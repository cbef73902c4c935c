// Tests of the image datasets and loader (train/data/image_dataset.h, image_loader.h): the real
// MNIST, Fashion-MNIST, CIFAR-10 and TinyImageNet sample under $QKV_DATA (default: the shared
// data folder), format errors on files written here (IDX plain and gzip, CIFAR-100, TinyImageNet
// folders with JPEGs from stb_image_write), and the loader's order, determinism across thread
// counts, normalization, augmentation, error propagation and shutdown.
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

#include "train/data/image_dataset.h"
#include "train/data/image_loader.h"
#include "tests/support/error_checks.h"
#include "tests/support/test_support.h"

using namespace qkv;
using namespace qkv::data;
namespace fs = std::filesystem;

namespace {

using test::data_dir;
using test::TempDir;
using test::check_contains;

// The message of the IOError that f throws, or a marker that matches no expectation.
template <class F>
std::string io_error(F&& f) {
  return test::error_of<IOError>(std::forward<F>(f));
}

std::vector<int64_t> histogram(const ImageDataset& d) {
  std::vector<int64_t> h(size_t(d.classes()));
  for (int64_t i = 0; i < d.size(); ++i) ++h[size_t(d.label(i))];
  return h;
}

std::vector<uint8_t> pixels_of(const ImageDataset& d, int64_t i) {
  std::vector<uint8_t> p(size_t(d.height() * d.width() * d.channels()));
  d.read(i, p.data());
  return p;
}

void write_file(const fs::path& path, const std::vector<uint8_t>& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

void write_text(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

void write_gzip(const fs::path& path, const std::vector<uint8_t>& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  REQUIRE(gzwrite(f, bytes.data(), unsigned(bytes.size())) == int(bytes.size()));
  gzclose(f);
}

std::vector<uint8_t> read_bytes(const fs::path& path, size_t n) {
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> b(n);
  in.read(reinterpret_cast<char*>(b.data()), std::streamsize(n));
  REQUIRE(in.gcount() == std::streamsize(n));
  return b;
}

// An IDX file: big-endian magic and dimensions, then the payload.
std::vector<uint8_t> idx_file(uint32_t magic, std::vector<uint32_t> dims, std::vector<uint8_t> payload) {
  std::vector<uint8_t> out;
  auto put = [&](uint32_t v) {
    for (int s = 24; s >= 0; s -= 8) out.push_back(uint8_t(v >> s));
  };
  put(magic);
  for (uint32_t d : dims) put(d);
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

std::vector<uint8_t> iota_bytes(size_t n, uint8_t start = 0) {
  std::vector<uint8_t> b(n);
  std::iota(b.begin(), b.end(), start);
  return b;
}

// Captures what a call prints to std::cout.
template <class F>
std::string captured_stdout(F&& f) {
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
  return std::make_shared<MemoryImageDataset>("synthetic", from_vector(px, {n, h, w, c}), from_vector(labels),
                                              classes);
}

// Every batch of one epoch.
std::vector<ImageBatch> epoch_batches(ImageLoader& loader, int64_t epoch) {
  loader.start_epoch(epoch);
  std::vector<ImageBatch> out;
  for (ImageBatch b; loader.next(b);) out.push_back(b);
  return out;
}

std::vector<int64_t> epoch_labels(ImageLoader& loader, int64_t epoch) {
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

bool is_gray(const std::vector<uint8_t>& rgb) {
  for (size_t p = 0; p < rgb.size(); p += 3)
    if (rgb[p] != rgb[p + 1] || rgb[p] != rgb[p + 2]) return false;
  return true;
}

// Example i of `data` is `file` decoded as one gray channel, repeated as R, G and B.
void check_promoted(const ImageDataset& data, int64_t i, const fs::path& file) {
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

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

// ---- real data ------------------------------------------------------------------------------

TEST_CASE("idx: MNIST train and test counts with label histograms and pixel statistics" * doctest::test_suite("data")) {
  if (!test::have_data({"mnist"})) return;
  const fs::path root = data_dir() / "mnist";
  const auto train = load_idx_dataset(root.string(), Split::train, "mnist");
  CHECK(train->name() == "mnist/train");
  CHECK(train->size() == 60000);
  CHECK((train->height() == 28 && train->width() == 28 && train->channels() == 1 && train->classes() == 10));
  CHECK(histogram(*train) == std::vector<int64_t>{5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949});
  CHECK(train->label(0) == 5);   // the well-known first digits
  const auto test = load_idx_dataset(root.string(), Split::test, "mnist");
  CHECK(test->name() == "mnist/test");
  CHECK(test->size() == 10000);
  CHECK(histogram(*test) == std::vector<int64_t>{980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009});
  CHECK(test->label(0) == 7);
  const auto [mean, sd] = channel_stats(*train);   // the usual normalization constants
  CHECK(mean[0] == doctest::Approx(0.1307).epsilon(0.02));
  CHECK(sd[0] == doctest::Approx(0.3081).epsilon(0.02));
}

TEST_CASE("idx: Fashion-MNIST from Debian's dataset-fashion-mnist (gzip without FNAME)" * doctest::test_suite("data")) {
  const fs::path root = "/usr/share/datasets/fashion-mnist";
  if (!fs::exists(root / "train-images-idx3-ubyte.gz")) {
    test::skip("dataset-fashion-mnist is not installed (apt-get install dataset-fashion-mnist)");
    return;
  }
  const auto train = load_idx_dataset(root.string(), Split::train, "fashion-mnist");
  const auto test = load_idx_dataset(root.string(), Split::test, "fashion-mnist");
  CHECK(train->size() == 60000);
  CHECK(test->size() == 10000);
  CHECK(histogram(*train) == std::vector<int64_t>(10, 6000));
  CHECK(histogram(*test) == std::vector<int64_t>(10, 1000));
}

TEST_CASE("cifar: CIFAR-10 uses the training batches present and matches test_batch.bin byte for byte" *
          doctest::test_suite("data")) {
  if (!test::have_data({"cifar-10-batches-bin/data_batch_1.bin", "cifar-10-batches-bin/test_batch.bin"})) return;
  const fs::path root = data_dir() / "cifar-10-batches-bin";
  int batches = 0;
  for (int i = 1; i <= 5; ++i) batches += fs::exists(root / ("data_batch_" + std::to_string(i) + ".bin"));
  std::shared_ptr<ImageDataset> train;
  const std::string said = captured_stdout([&] { train = load_cifar10(root.string(), Split::train); });
  CHECK(said.find(cat("cifar10: ", batches, " of 5 training batches, ", batches * 10000, " images")) != std::string::npos);
  CHECK(train->size() == batches * 10000);
  CHECK((train->height() == 32 && train->width() == 32 && train->channels() == 3 && train->classes() == 10));
  const auto batch1 = std::make_shared<SubsetDataset>(train, [] {
    std::vector<int64_t> first(10000);
    std::iota(first.begin(), first.end(), 0);
    return first;
  }(), "data_batch_1");
  CHECK(histogram(*batch1) == std::vector<int64_t>{1005, 974, 1032, 1016, 999, 937, 1030, 1001, 1025, 981});

  const auto test = load_cifar10(root.string(), Split::test);
  CHECK(test->size() == 10000);
  CHECK(histogram(*test) == std::vector<int64_t>(10, 1000));
  const std::vector<uint8_t> record = read_bytes(root / "test_batch.bin", 3073);
  CHECK(record[0] == 3);   // MANIFEST.md: first labels 3 8 8 0 6 6 1 6 3 1
  CHECK(test->label(0) == record[0]);
  const std::vector<int64_t> first_labels{3, 8, 8, 0, 6, 6, 1, 6, 3, 1};
  for (int64_t i = 0; i < 10; ++i) CHECK(test->label(i) == first_labels[size_t(i)]);
  const std::vector<uint8_t> hwc = pixels_of(*test, 0);
  int64_t mismatches = 0;
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t p = 0; p < 1024; ++p) mismatches += hwc[size_t(p * 3 + c)] != record[size_t(1 + c * 1024 + p)];
  CHECK(mismatches == 0);

  // The loader agrees: first batch in file order, normalized planes of the raw record.
  LoaderOptions o;
  o.batch_size = 16, o.shuffle = false, o.workers = 2, o.mean = {0.4914f, 0.4822f, 0.4465f};
  o.std = {0.2470f, 0.2435f, 0.2616f};
  ImageLoader loader(test, o);
  ImageBatch b;
  REQUIRE(loader.next(b));
  CHECK(b.images.shape() == Shape{16, 3, 32, 32});
  const std::vector<int64_t> labels = b.labels.to_vector<int64_t>();
  CHECK(std::vector<int64_t>(labels.begin(), labels.begin() + 10) == first_labels);
  const std::vector<float> x = b.images.to_vector<float>();
  double worst = 0;
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t p = 0; p < 1024; ++p) {
      const double want = (record[size_t(1 + c * 1024 + p)] / 255.0 - o.mean[size_t(c)]) / o.std[size_t(c)];
      worst = std::max(worst, std::abs(double(x[size_t(c * 1024 + p)]) - want));
    }
  CHECK(worst < 1e-5);

  const auto [mean, sd] = channel_stats(*train);   // MANIFEST.md: the known 50k-image values
  const std::vector<double> want_mean{0.4914, 0.4822, 0.4465}, want_sd{0.2470, 0.2435, 0.2616};
  for (size_t c = 0; c < 3; ++c) {
    CHECK(std::abs(mean[c] - want_mean[c]) < 0.01);
    CHECK(std::abs(sd[c] - want_sd[c]) < 0.01);
  }
}

TEST_CASE("tinyimagenet: classes and 64x64x3 images from the folder with grayscale promoted and val annotations resolved" *
          doctest::test_suite("data")) {
  // The full dataset or the sample, whichever the data folder holds; counts come from its files.
  const char* folder = fs::exists(data_dir() / "tiny-imagenet-200") ? "tiny-imagenet-200" : "tiny-imagenet-200-sample";
  if (!test::have_data({folder})) return;
  const fs::path root = data_dir() / folder;
  std::vector<std::string> wnids;
  {
    std::ifstream in(root / "wnids.txt");
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) wnids.push_back(line);
  }
  REQUIRE(!wnids.empty());
  std::vector<int64_t> train_counts, val_counts(wnids.size(), 0);
  for (const std::string& wnid : wnids) {
    const fs::path dir = root / "train" / wnid / "images";
    train_counts.push_back(int64_t(std::distance(fs::directory_iterator(dir), fs::directory_iterator())));
  }
  {
    std::ifstream ann(root / "val" / "val_annotations.txt");
    for (std::string line; std::getline(ann, line);) {
      const size_t a = line.find('\t'), b = line.find('\t', a + 1);
      val_counts[size_t(std::find(wnids.begin(), wnids.end(), line.substr(a + 1, b - a - 1)) - wnids.begin())] += 1;
    }
  }
  const auto train = load_tinyimagenet(root.string(), Split::train);
  const auto val = load_tinyimagenet(root.string(), Split::test);
  CHECK(train->classes() == int64_t(wnids.size()));
  CHECK(val->classes() == int64_t(wnids.size()));
  CHECK((train->height() == 64 && train->width() == 64 && train->channels() == 3));
  CHECK(histogram(*train) == train_counts);
  CHECK(histogram(*val) == val_counts);

  // The first annotation line names an image and a wnid: label = the wnid's line, pixels = the file.
  std::ifstream ann(root / "val" / "val_annotations.txt");
  std::string line;
  REQUIRE(std::getline(ann, line));
  const std::string file = line.substr(0, line.find('\t'));
  const std::string wnid = line.substr(file.size() + 1, line.find('\t', file.size() + 1) - file.size() - 1);
  CHECK(val->label(0) == int64_t(std::find(wnids.begin(), wnids.end(), wnid) - wnids.begin()));
  int w = 0, h = 0, comp = 0;
  uint8_t* want = stbi_load((root / "val" / "images" / file).c_str(), &w, &h, &comp, 3);
  REQUIRE(want != nullptr);
  CHECK(pixels_of(*val, 0) == std::vector<uint8_t>(want, want + 64 * 64 * 3));
  stbi_image_free(want);

  // The single-component (grayscale) JPEGs, found by their headers: train/<wnid>/images sorted by
  // name, val in annotation order. The first of train is promoted to RGB by repeating its plane.
  auto is_gray = [](const fs::path& f) {
    int w0 = 0, h0 = 0, comp0 = 0;
    REQUIRE(stbi_info(f.c_str(), &w0, &h0, &comp0) != 0);
    return comp0 == 1;
  };
  int train_gray = 0, val_gray = 0;
  int64_t index = 0, first_gray = -1;
  fs::path first_gray_file;
  for (const std::string& wnid : wnids) {
    std::vector<fs::path> names;
    for (const auto& e : fs::directory_iterator(root / "train" / wnid / "images")) names.push_back(e.path());
    std::sort(names.begin(), names.end());
    for (const fs::path& f : names) {
      if (is_gray(f)) {
        ++train_gray;
        if (first_gray < 0) first_gray = index, first_gray_file = f;
      }
      ++index;
    }
  }
  for (const auto& e : fs::directory_iterator(root / "val" / "images")) val_gray += is_gray(e.path());
  if (first_gray >= 0) check_promoted(*train, first_gray, first_gray_file);

  // Every image decodes on the workers; exactly the grayscale JPEGs come out with R = G = B.
  for (const auto& [data, gray_expected] : {std::pair{train, train_gray}, std::pair{val, val_gray}}) {
    LoaderOptions o;
    o.batch_size = 32, o.workers = 3, o.shuffle = false;
    ImageLoader loader(data, o);
    int gray = 0;
    for (ImageBatch b; loader.next(b);) {
      const std::vector<float> x = b.images.to_vector<float>();
      for (int64_t i = 0; i < b.images.size(0); ++i) {
        const float* img = x.data() + i * 3 * 4096;
        bool same = true;
        for (int64_t p = 0; p < 4096 && same; ++p) same = img[p] == img[4096 + p] && img[p] == img[8192 + p];
        gray += same;
      }
    }
    CHECK(gray == gray_expected);
  }
}

// ---- files written here: formats and their errors -----------------------------------------

TEST_CASE("idx: plain and gzip files written here, and every header and size error") {
  TempDir d;
  const std::vector<uint8_t> images = idx_file(0x803, {3, 2, 2}, iota_bytes(12, 10));
  const std::vector<uint8_t> labels = idx_file(0x801, {3}, {1, 2, 9});
  write_file(d.path / "plain" / "train-images-idx3-ubyte", images);
  write_file(d.path / "plain" / "train-labels-idx1-ubyte", labels);
  fs::create_directories(d.path / "gz");
  write_gzip(d.path / "gz" / "t10k-images-idx3-ubyte.gz", images);
  write_gzip(d.path / "gz" / "t10k-labels-idx1-ubyte.gz", labels);
  for (const auto& [dir, split] : {std::pair{"plain", Split::train}, std::pair{"gz", Split::test}}) {
    CAPTURE(dir);
    const auto data = load_idx_dataset((d.path / dir).string(), split, "tiny");
    CHECK(data->size() == 3);
    CHECK((data->height() == 2 && data->width() == 2 && data->channels() == 1));
    CHECK(pixels_of(*data, 1) == std::vector<uint8_t>{14, 15, 16, 17});
    CHECK(data->label(2) == 9);
  }

  auto load_with = [&](const std::vector<uint8_t>& img, const std::vector<uint8_t>& lab) {
    TempDir t;
    write_file(t.path / "train-images-idx3-ubyte", img);
    write_file(t.path / "train-labels-idx1-ubyte", lab);
    return io_error([&] { load_idx_dataset(t.path.string(), Split::train, "bad"); });
  };
  check_contains(load_with(idx_file(0x804, {3, 2, 2}, iota_bytes(12)), labels),
               {"train-images-idx3-ubyte", "bad magic 0x00000804", "expected 0x00000803"});
  check_contains(load_with(images, idx_file(0x803, {3}, {1, 2, 3})),
               {"train-labels-idx1-ubyte", "bad magic 0x00000803", "expected 0x00000801"});
  check_contains(load_with(idx_file(0x803, {3, 2, 2}, iota_bytes(11)), labels),
               {"train-images-idx3-ubyte", "truncated", "expected 28 bytes, got 27"});
  check_contains(load_with(std::vector<uint8_t>(images.begin(), images.begin() + 6), labels),
               {"train-images-idx3-ubyte", "truncated header", "expected at least 8 bytes, got 6"});
  check_contains(load_with(idx_file(0x803, {3, 2, 2}, iota_bytes(13)), labels),
               {"train-images-idx3-ubyte", "expected 28 bytes, got 29"});
  check_contains(load_with(images, idx_file(0x801, {2}, {1, 2})),
               {"3 images", "2 labels", "train-labels-idx1-ubyte"});
  check_contains(load_with(images, idx_file(0x801, {3}, {1, 10, 2})),
               {"train-labels-idx1-ubyte", "label 10 of example 1", "expected 0..9"});

  TempDir empty_dir;
  check_contains(io_error([&] { load_idx_dataset(empty_dir.path.string(), Split::test, "none"); }),
               {"t10k-images-idx3-ubyte", "t10k-images-idx3-ubyte.gz", "looked for"});

  TempDir corrupt;   // a gzip header followed by bytes that are not a deflate stream
  std::vector<uint8_t> gz{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3};
  for (int i = 0; i < 64; ++i) gz.push_back(uint8_t(0xff - i));
  write_file(corrupt.path / "train-images-idx3-ubyte.gz", gz);
  write_file(corrupt.path / "train-labels-idx1-ubyte", labels);
  check_contains(io_error([&] { load_idx_dataset(corrupt.path.string(), Split::train, "corrupt"); }),
               {"train-images-idx3-ubyte.gz"});
}

TEST_CASE("cifar: CIFAR-100 file written here: coarse and fine labels, HWC pixels, bad label, truncation") {
  TempDir d;
  const std::vector<std::pair<uint8_t, uint8_t>> labels{{1, 11}, {19, 99}, {0, 0}};
  auto pixel = [](int64_t r, int64_t c, int64_t p) { return uint8_t(r * 50 + c * 16 + p % 13); };
  auto records = [&](const std::vector<std::pair<uint8_t, uint8_t>>& ls) {
    std::vector<uint8_t> bytes;
    for (size_t r = 0; r < ls.size(); ++r) {
      bytes.push_back(ls[r].first);
      bytes.push_back(ls[r].second);
      for (int64_t c = 0; c < 3; ++c)
        for (int64_t p = 0; p < 1024; ++p) bytes.push_back(pixel(int64_t(r), c, p));
    }
    return bytes;
  };
  write_file(d.path / "train.bin", records(labels));
  const auto fine = load_cifar100(d.path.string(), Split::train);
  const auto coarse = load_cifar100(d.path.string(), Split::train, true);
  CHECK(fine->classes() == 100);
  CHECK(coarse->classes() == 20);
  for (int64_t i = 0; i < 3; ++i) {
    CHECK(fine->label(i) == labels[size_t(i)].second);
    CHECK(coarse->label(i) == labels[size_t(i)].first);
  }
  const std::vector<uint8_t> px = pixels_of(*fine, 1);
  int64_t mismatches = 0;
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t p = 0; p < 1024; ++p) mismatches += px[size_t(p * 3 + c)] != pixel(1, c, p);
  CHECK(mismatches == 0);

  write_file(d.path / "test.bin", records({{1, 11}, {3, 100}}));
  check_contains(io_error([&] { load_cifar100(d.path.string(), Split::test); }),
               {"test.bin", "record 1 has label 100, expected 0..99"});
  write_file(d.path / "test.bin", records({{20, 5}}));
  check_contains(io_error([&] { load_cifar100(d.path.string(), Split::test, true); }),
               {"test.bin", "record 0 has label 20, expected 0..19"});
  std::vector<uint8_t> cut = records(labels);
  cut.resize(cut.size() - 100);
  write_file(d.path / "test.bin", cut);
  check_contains(io_error([&] { load_cifar100(d.path.string(), Split::test); }),
               {"test.bin", "truncated", "expected 9222 bytes", "got 9122"});

  TempDir empty_dir;
  check_contains(io_error([&] { load_cifar100(empty_dir.path.string(), Split::train); }), {"missing file", "train.bin"});
  check_contains(io_error([&] { load_cifar10(empty_dir.path.string(), Split::train); }),
               {"data_batch_1.bin", "data_batch_5.bin"});
  check_contains(io_error([&] { load_cifar10(empty_dir.path.string(), Split::test); }), {"test_batch.bin"});
  std::vector<uint8_t> ten(3073, 7);
  ten[0] = 10;
  write_file(empty_dir.path / "data_batch_3.bin", ten);
  check_contains(io_error([&] { captured_stdout([&] { load_cifar10(empty_dir.path.string(), Split::train); }); }),
               {"data_batch_3.bin", "record 0 has label 10, expected 0..9"});
}

namespace {

// A 64x64 (or side x side) JPEG with `comp` channels whose values vary over the image.
void write_jpeg(const fs::path& path, int comp, int side = 64) {
  fs::create_directories(path.parent_path());
  std::vector<uint8_t> px(size_t(side * side * comp));
  for (int y = 0; y < side; ++y)
    for (int x = 0; x < side; ++x)
      for (int c = 0; c < comp; ++c) px[size_t((y * side + x) * comp + c)] = uint8_t(x * 3 + y * 2 + c * 60);
  REQUIRE(stbi_write_jpg(path.c_str(), side, side, comp, px.data(), 95) != 0);
}

}  // namespace


TEST_CASE("tinyimagenet: folders written here: grayscale JPEG, image size, malformed annotations") {
  TempDir d;
  const fs::path& root = d.path;
  write_text(root / "wnids.txt", "n001\nn002\n\n");
  write_jpeg(root / "train/n001/images/n001_0.JPEG", 3);
  write_jpeg(root / "train/n001/images/n001_1.JPEG", 1);
  write_jpeg(root / "train/n002/images/n002_0.JPEG", 3);
  write_jpeg(root / "val/images/val_0.JPEG", 1);
  write_jpeg(root / "val/images/val_1.JPEG", 3);
  const std::string annotations = "val_0.JPEG\tn002\t0\t0\t63\t63\nval_1.JPEG\tn001\t1\t2\t30\t40\n";
  write_text(root / "val/val_annotations.txt", annotations);

  const auto train = load_tinyimagenet(root.string(), Split::train);
  CHECK(train->size() == 3);
  CHECK(train->classes() == 2);
  CHECK((train->label(0) == 0 && train->label(1) == 0 && train->label(2) == 1));
  CHECK_FALSE(is_gray(pixels_of(*train, 0)));
  // stb_image_write stores a 1-channel image as a 3-component JPEG with neutral chroma; the
  // real single-component (mode L) JPEGs are checked on the TinyImageNet sample above.
  check_promoted(*train, 1, root / "train/n001/images/n001_1.JPEG");

  const auto val = load_tinyimagenet(root.string(), Split::test);
  CHECK(val->size() == 2);
  CHECK((val->label(0) == 1 && val->label(1) == 0));
  CHECK(is_gray(pixels_of(*val, 0)));

  // An image of the wrong size, and a file that is not a JPEG: errors on read, naming the file,
  // also when read on a loader's worker.
  write_jpeg(root / "train/n002/images/n002_1.JPEG", 3, 32);
  write_text(root / "train/n002/images/n002_2.JPEG", "not a jpeg");
  const auto broken = load_tinyimagenet(root.string(), Split::train);
  REQUIRE(broken->size() == 5);
  std::vector<uint8_t> buf(64 * 64 * 3);
  check_contains(io_error([&] { broken->read(3, buf.data()); }), {"n002_1.JPEG", "32x32, expected 64x64"});
  check_contains(io_error([&] { broken->read(4, buf.data()); }), {"n002_2.JPEG", "cannot decode"});
  LoaderOptions o;
  o.batch_size = 1, o.shuffle = false, o.workers = 2;
  ImageLoader loader(broken, o);
  ImageBatch b;
  for (int k = 0; k < 3; ++k) REQUIRE(loader.next(b));
  check_contains(io_error([&] { loader.next(b); }), {"n002_1.JPEG"});

  write_text(root / "val/val_annotations.txt", annotations + "val_1.JPEG\tn001\n");
  check_contains(io_error([&] { load_tinyimagenet(root.string(), Split::test); }),
               {"val_annotations.txt:3", "expected 6 tab-separated fields"});
  write_text(root / "val/val_annotations.txt", "val_0.JPEG\tn002\t0\t0\t63\t63\nval_1.JPEG\tn999\t1\t2\t30\t40\n");
  check_contains(io_error([&] { load_tinyimagenet(root.string(), Split::test); }),
               {"val_annotations.txt:2", "n999", "not in wnids.txt"});
  write_text(root / "val/val_annotations.txt", "val_7.JPEG\tn002\t0\t0\t63\t63\n");
  check_contains(io_error([&] { load_tinyimagenet(root.string(), Split::test); }),
               {"val_annotations.txt:1", "missing image", "val_7.JPEG"});
  write_text(root / "wnids.txt", "n001\nn002\nn003\n");
  check_contains(io_error([&] { load_tinyimagenet(root.string(), Split::train); }),
               {"missing folder", "train/n003/images"});
  fs::remove(root / "wnids.txt");
  check_contains(io_error([&] { load_tinyimagenet(root.string(), Split::train); }), {"missing file", "wnids.txt"});
}

// ---- datasets in memory ---------------------------------------------------------------------

TEST_CASE("image dataset: MemoryImageDataset, SubsetDataset and split_holdout") {
  const auto data = make_dataset(50, 2, 2, 1, 50, [](int64_t i, int64_t, int64_t, int64_t) { return i + 1; },
                                 [](int64_t i) { return i; });
  std::vector<uint8_t> buf(4);
  CHECK_THROWS_AS(data->read(50, buf.data()), IndexError);
  CHECK_THROWS_AS(data->label(-1), IndexError);
  CHECK_THROWS_AS(MemoryImageDataset("x", zeros({2, 1, 1, 1}, DType::u8), from_vector<int64_t>({0, 3}), 3),
                  ValueError);
  CHECK_THROWS_AS(MemoryImageDataset("x", zeros({2, 1, 1, 1}), from_vector<int64_t>({0, 1}), 3), DTypeError);

  const auto [train, val] = split_holdout(data, 10, 7);
  CHECK(train->size() == 40);
  CHECK(val->size() == 10);
  std::set<int64_t> seen;
  for (const auto& part : {train, val})
    for (int64_t i = 0; i < part->size(); ++i) {
      seen.insert(part->label(i));
      part->read(i, buf.data());
      CHECK(buf[0] == part->label(i) + 1);   // pixels follow their label through the index map
    }
  CHECK(seen.size() == 50);
  std::vector<int64_t> val_labels, again_labels, other_labels;
  const auto again = split_holdout(data, 10, 7).second, other = split_holdout(data, 10, 8).second;
  for (int64_t i = 0; i < 10; ++i) {
    val_labels.push_back(val->label(i));
    again_labels.push_back(again->label(i));
    other_labels.push_back(other->label(i));
  }
  CHECK(val_labels == again_labels);
  CHECK(val_labels != other_labels);
  CHECK(val_labels != std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  CHECK_THROWS_AS(split_holdout(data, 51, 0), ValueError);
  CHECK_THROWS_AS(SubsetDataset(data, {3, 50}, "bad"), IndexError);
  CHECK_THROWS_AS(val->label(10), IndexError);
}

TEST_CASE("image dataset: channel_stats of a known dataset") {
  // Channel 0 alternates 0 and 255 across pixels (mean 1/2, std 1/2); channel 1 is 51 (0.2, 0).
  const auto data = make_dataset(6, 2, 2, 2, 1,
                                 [](int64_t, int64_t y, int64_t x, int64_t c) { return c == 1 ? 51 : ((x + y) % 2) * 255; },
                                 [](int64_t) { return 0; });
  const auto [mean, sd] = channel_stats(*data, 3);
  CHECK(mean[0] == doctest::Approx(0.5));
  CHECK(sd[0] == doctest::Approx(0.5));
  CHECK(mean[1] == doctest::Approx(0.2));
  CHECK(sd[1] == doctest::Approx(0.0));
}

// ---- the loader -----------------------------------------------------------------------------

TEST_CASE("loader: batches cover every example exactly once per epoch, with a partial or dropped last batch") {
  const auto data = make_dataset(103, 2, 2, 1, 103, [](int64_t i, int64_t, int64_t, int64_t) { return i; },
                                 [](int64_t i) { return i; });
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
          for (size_t j = 0; j < l.size(); ++j) CHECK(x[j * 4] == doctest::Approx(l[j] / 255.0));   // pixels = label
          labels.insert(labels.end(), l.begin(), l.end());
        }
        std::vector<int64_t> sorted = labels;
        std::sort(sorted.begin(), sorted.end());
        CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end());   // no repeats
        CHECK(sorted.size() == (drop_last ? 100u : 103u));
        ImageBatch b;
        CHECK_FALSE(loader.next(b));   // the epoch is over, and stays over
        CHECK_FALSE(loader.next(b));
      }
    }
  }
}

TEST_CASE("loader: the same seed gives the same batches with 0, 1 and 3 workers") {
  const auto data = make_dataset(
      50, 6, 5, 3, 7, [](int64_t i, int64_t y, int64_t x, int64_t c) { return (i * 37 + y * 11 + x * 5 + c * 71) % 256; },
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
  const auto data = make_dataset(64, 1, 1, 1, 64, [](int64_t, int64_t, int64_t, int64_t) { return 0; },
                                 [](int64_t i) { return i; });
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
  CHECK(flipped + plain == n);   // every output is the image or its mirror
  CHECK(flipped > 70);
  CHECK(flipped < 130);
}

TEST_CASE("loader: crop padding shifts the image inside a zero border") {
  const int64_t n = 200, side = 6, pad = 2;
  const auto data = make_dataset(n, side, side, 1, 1,
                                 [](int64_t, int64_t y, int64_t x, int64_t) { return 1 + y * side + x; },
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
  CHECK(shifts.size() >= 20);   // of the 25 offsets in [-2, 2]^2
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
  const auto base = make_dataset(60, 2, 2, 1, 60, [](int64_t i, int64_t, int64_t, int64_t) { return i; },
                                 [](int64_t i) { return i; });
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
    REQUIRE(loader.next(b));   // the loader goes on with the next batch
    CHECK(b.labels.to_vector<int64_t>().front() == 40);
  }
}

TEST_CASE("loader: destroying it mid-epoch returns promptly, and wait_seconds counts stalls") {
  const auto base = make_dataset(100000, 2, 2, 1, 1, [](int64_t, int64_t, int64_t, int64_t) { return 1; },
                                 [](int64_t) { return 0; });
  const auto slow = std::make_shared<FaultyDataset>(base, -1, std::chrono::microseconds(2000));
  LoaderOptions o;
  o.batch_size = 128, o.workers = 3, o.prefetch = 4;   // a batch takes one worker over 250 ms
  auto loader = std::make_unique<ImageLoader>(slow, o);
  const auto t0 = std::chrono::steady_clock::now();
  ImageBatch b;
  REQUIRE(loader->next(b));   // next() has to wait for the first batch
  REQUIRE(loader->next(b));
  const double waited = loader->wait_seconds(), elapsed = seconds_since(t0);
  CHECK(waited > 0.2);
  CHECK(waited <= elapsed + 1e-3);
  const auto t1 = std::chrono::steady_clock::now();
  loader.reset();   // workers are mid-batch: they must stop between examples, not finish the epoch
  CHECK(seconds_since(t1) < 0.1);

  loader = std::make_unique<ImageLoader>(slow, o);
  loader->start_epoch(3);   // workers busy, nothing taken
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const auto t2 = std::chrono::steady_clock::now();
  loader.reset();
  CHECK(seconds_since(t2) < 0.1);
}
