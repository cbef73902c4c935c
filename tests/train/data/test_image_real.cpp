// The image readers on the real datasets under $QKV_DATA (default: the shared data folder):
// MNIST, Fashion-MNIST from Debian's package, CIFAR-10 and TinyImageNet, every expectation
// derived from the files present. Each case skips, naming the folder, when its data is absent.
#include <doctest/doctest.h>

#include "tests/train/data/image_helpers.h"

using namespace qkv;
using namespace qkv::data;
using namespace qkv::test;

TEST_CASE("idx: MNIST train and test counts with label histograms and pixel statistics" * doctest::test_suite("data")) {
  if (!test::have_data({"mnist"})) return;
  const fs::path root = data_dir() / "mnist";
  const auto train = load_idx_dataset(root.string(), Split::train, "mnist");
  CHECK(train->name() == "mnist/train");
  CHECK(train->size() == 60000);
  CHECK((train->height() == 28 && train->width() == 28 && train->channels() == 1 && train->classes() == 10));
  CHECK(histogram(*train) == std::vector<int64_t>{5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949});
  CHECK(train->label(0) == 5);  // the well-known first digits
  const auto test = load_idx_dataset(root.string(), Split::test, "mnist");
  CHECK(test->name() == "mnist/test");
  CHECK(test->size() == 10000);
  CHECK(histogram(*test) == std::vector<int64_t>{980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009});
  CHECK(test->label(0) == 7);
  const auto [mean, sd] = channel_stats(*train);  // the usual normalization constants
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
  CHECK(said.find(cat("cifar10: ", batches, " of 5 training batches, ", batches * 10000, " images")) !=
        std::string::npos);
  CHECK(train->size() == batches * 10000);
  CHECK((train->height() == 32 && train->width() == 32 && train->channels() == 3 && train->classes() == 10));
  const auto batch1 = std::make_shared<SubsetDataset>(
      train,
      [] {
        std::vector<int64_t> first(10000);
        std::iota(first.begin(), first.end(), 0);
        return first;
      }(),
      "data_batch_1");
  CHECK(histogram(*batch1) == std::vector<int64_t>{1005, 974, 1032, 1016, 999, 937, 1030, 1001, 1025, 981});

  const auto test = load_cifar10(root.string(), Split::test);
  CHECK(test->size() == 10000);
  CHECK(histogram(*test) == std::vector<int64_t>(10, 1000));
  const std::vector<uint8_t> record = read_bytes(root / "test_batch.bin", 3073);
  CHECK(record[0] == 3);  // MANIFEST.md: first labels 3 8 8 0 6 6 1 6 3 1
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

  const auto [mean, sd] = channel_stats(*train);  // MANIFEST.md: the known 50k-image values
  const std::vector<double> want_mean{0.4914, 0.4822, 0.4465}, want_sd{0.2470, 0.2435, 0.2616};
  for (size_t c = 0; c < 3; ++c) {
    CHECK(std::abs(mean[c] - want_mean[c]) < 0.01);
    CHECK(std::abs(sd[c] - want_sd[c]) < 0.01);
  }
}

TEST_CASE(
    "tinyimagenet: classes and 64x64x3 images from the folder with grayscale promoted and val annotations resolved" *
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
