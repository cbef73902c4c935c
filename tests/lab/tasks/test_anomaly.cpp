// The anomaly family's features (lab/tasks/anomaly.h): images resized bilinearly and
// ImageNet-normalized before the ResNet, in batches, checked against the same steps done here
// by hand; the weight-file digest and the cache names built from it; and the feature cache,
// computed once, written atomically, then reused, with a line saying which.
#include <doctest/doctest.h>

#include <vector>

#include "io/safetensors.h"
#include "lab/tasks/anomaly.h"
#include "tests/support/error_checks.h"
#include "tests/support/small_resnet.h"
#include "tests/support/test_support.h"
#include "train/data/image/image_resize.h"

using namespace qkv;
namespace fs = std::filesystem;

namespace {

std::shared_ptr<data::MemoryImageDataset> images(int64_t n, int64_t side, int64_t channels, Generator& gen) {
  const Tensor pixels = (rand({n, side, side, channels}, {}, &gen) * 255.0).to(DType::u8);
  std::vector<int64_t> labels(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) labels[size_t(i)] = i % 3;
  return std::make_shared<data::MemoryImageDataset>("toy", pixels, from_vector(labels), 3);
}

// What resnet_features should compute: each image resized, normalized, then one forward pass.
Tensor by_hand(const nn::BasicResNet& net, const data::MemoryImageDataset& d, int64_t size) {
  const int64_t h = d.height(), w = d.width(), c = d.channels(), n = d.size();
  const float mean[3] = {0.485f, 0.456f, 0.406f}, stdev[3] = {0.229f, 0.224f, 0.225f};
  std::vector<uint8_t> raw(size_t(h * w * c)), sized(size_t(size * size * c));
  std::vector<float> x(size_t(n * 3 * size * size));
  for (int64_t i = 0; i < n; ++i) {
    d.read(i, raw.data());
    data::resize_bilinear(raw.data(), h, w, c, size, size, sized.data());
    for (int64_t ch = 0; ch < 3; ++ch)
      for (int64_t p = 0; p < size * size; ++p)
        x[size_t((i * 3 + ch) * size * size + p)] =
            (float(sized[size_t(p * c + (c == 3 ? ch : 0))]) / 255.0f - mean[ch]) / stdev[ch];
  }
  return net.features(from_vector(x, {n, 3, size, size}));
}

double max_diff(const Tensor& a, const Tensor& b) { return amax(abs(a - b)).item<double>(); }

}  // namespace

TEST_CASE("anomaly features: images are resized, normalized and encoded in batches") {
  Generator gen(4);
  const nn::BasicResNet& net = test::small_resnet();
  NoGradGuard no_grad;
  const auto rgb = images(3, 8, 3, gen), gray = images(3, 8, 1, gen);
  const data::LabelledFeatures f = tasks::resnet_features(net, *rgb, 16, kCPU, 2);  // batches of 2 and 1
  REQUIRE(f.features.shape() == Shape{3, 512});
  CHECK(max_diff(f.features, by_hand(net, *rgb, 16)) < 1e-4);
  CHECK(f.labels.to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2});
  // At the native size the resize is skipped, and the features differ.
  const data::LabelledFeatures native = tasks::resnet_features(net, *rgb, 0, kCPU);
  CHECK(max_diff(native.features, by_hand(net, *rgb, 8)) < 1e-4);
  CHECK(max_diff(native.features, f.features) > 1e-3);
  // Grayscale is repeated to the three channels.
  CHECK(max_diff(tasks::resnet_features(net, *gray, 16, kCPU).features, by_hand(net, *gray, 16)) < 1e-4);
}

TEST_CASE("anomaly features: the cache name holds the image size and a digest of the weights file") {
  test::TempDir dir;
  for (const char* sub : {"a", "b", "c"}) fs::create_directories(dir.path / sub);
  const std::string a = dir.write("a/resnet34.safetensors", std::string(1000, 'x'));
  const std::string b = dir.write("b/resnet34.safetensors", std::string(999, 'x') + "y");
  const std::string c = dir.write("c/resnet34.safetensors", std::string(1000, 'x'));
  CHECK(tasks::file_digest(a) == tasks::file_digest(c));
  CHECK(tasks::file_digest(a) != tasks::file_digest(b));
  CHECK(tasks::file_digest(a) != tasks::file_digest(dir.write("d", std::string(1001, 'x'))));
  CHECK(tasks::file_digest(a).size() == 16);
  const std::string da = tasks::file_digest(a), db = tasks::file_digest(b);
  const std::string name = tasks::feature_cache_name("cifar100", "train", 224, a, da);
  test::check_contains(name, {"cifar100", "train", "224px", "resnet34", da});
  CHECK(name != tasks::feature_cache_name("cifar100", "train", 224, b, db));  // same stem, other bytes
  CHECK(name != tasks::feature_cache_name("cifar100", "train", 0, a, da));
  CHECK(name != tasks::feature_cache_name("cifar100", "test", 224, a, da));
  CHECK(tasks::feature_cache_name("cifar10", "test", 0, "", "").find("random") != std::string::npos);
  CHECK_THROWS_AS(tasks::file_digest(dir.file("absent")), IOError);
}

TEST_CASE("anomaly features: the cache is written once, atomically, then reused") {
  test::TempDir dir;
  const fs::path cache = dir.path / "features" / "toy-train.safetensors";
  int computed = 0;
  auto compute = [&] {
    ++computed;
    return data::LabelledFeatures{from_vector<float>({1, 2, 3, 4, 5, 6}, {3, 2}), from_vector<int64_t>({0, 1, 0})};
  };
  std::vector<std::string> log;
  std::map<std::string, std::string> meta = {{"pixels", "224"}};
  const data::LabelledFeatures first = tasks::cached_features(cache, compute, meta, log);
  std::map<std::string, std::string> read_back;
  const data::LabelledFeatures second = tasks::cached_features(cache, compute, read_back, log);
  CHECK(computed == 1);
  CHECK(second.features.to_vector<float>() == first.features.to_vector<float>());
  CHECK(second.labels.to_vector<int64_t>() == first.labels.to_vector<int64_t>());
  CHECK(read_back.at("pixels") == "224");
  REQUIRE(log.size() == 2);
  test::check_contains(log[0], {"computed and cached", cache.string()});
  test::check_contains(log[1], {"reused", cache.string()});
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(cache.parent_path())) files += e.is_regular_file();
  CHECK(files == 1);  // no temporary left beside it

  safetensors::save(cache.string(), {{"features", from_vector<float>({1, 2})}});  // damaged
  test::check_contains(test::error_of<IOError>([&] { tasks::cached_features(cache, compute, read_back, log); }),
                       {cache.string(), "'labels'", "delete the file"});
  CHECK(computed == 1);
}
