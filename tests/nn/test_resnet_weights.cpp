// Loading torchvision's ResNet weights (nn/models/resnet.h load_torchvision_weights): exactly
// torchvision's state_dict names and shapes, written out here from torchvision's layout;
// num_batches_tracked accepted and not required; a missing, unexpected, misshaped or non-float32
// tensor named with the file. The smallest ResNet stands in for ResNet34 (87 MB of weights);
// the error cases use small files with a few keys.
#include <doctest/doctest.h>

#include <array>
#include <map>
#include <string>

#include "io/safetensors.h"
#include "nn/models/resnet.h"
#include "tests/support/error_checks.h"
#include "tests/support/small_resnet.h"
#include "tests/support/test_support.h"

using namespace qkv;
using namespace qkv::nn;

namespace {

// torchvision's resnet state_dict() (BasicBlock stages of `blocks`): names and shapes, from its
// layout. For {3, 4, 6, 3} and 1000 classes, torchvision.models.resnet34().
std::map<std::string, Shape> torchvision_layout(const std::array<int64_t, 4>& blocks, int64_t classes) {
  std::map<std::string, Shape> s;
  auto bn = [&](const std::string& p, int64_t c) {
    for (const char* k : {"weight", "bias", "running_mean", "running_var"}) s[p + "." + k] = {c};
    s[p + ".num_batches_tracked"] = {};
  };
  s["conv1.weight"] = {64, 3, 7, 7};
  bn("bn1", 64);
  const int64_t widths[4] = {64, 128, 256, 512};
  int64_t in = 64;
  for (int l = 0; l < 4; ++l)
    for (int64_t b = 0; b < blocks[size_t(l)]; ++b) {
      const std::string p = "layer" + std::to_string(l + 1) + "." + std::to_string(b);
      const int64_t out = widths[l];
      s[p + ".conv1.weight"] = {out, in, 3, 3};
      bn(p + ".bn1", out);
      s[p + ".conv2.weight"] = {out, out, 3, 3};
      bn(p + ".bn2", out);
      if (b == 0 && l > 0) {
        s[p + ".downsample.0.weight"] = {out, in, 1, 1};
        bn(p + ".downsample.1", out);
      }
      in = out;
    }
  s["fc.weight"] = {classes, 512};
  s["fc.bias"] = {classes};
  return s;
}

BasicResNet& small_net() { return test::small_resnet(); }

std::string load_error(const std::string& file) {
  return test::error_of<IOError>([&] { load_torchvision_weights(small_net(), file); });
}

}  // namespace

TEST_CASE("resnet weights: torchvision's names and shapes load and a wrong tensor is named with the file") {
  // One test case, so that the network is built once under CTest too.
  {  // The state dict is torchvision's, name for name and shape for shape.
    std::map<std::string, Shape> got;
    for (const auto& [name, t] : small_net().state_dict()) got[name] = t.shape();
    CHECK(got == torchvision_layout({1, 1, 1, 1}, 10));
    // ResNet34's layout has the 218 entries of len(torchvision.models.resnet34().state_dict()),
    // which tests/nn/test_resnet.cpp finds in ResNet34 (and tests/parity/check_resnet.py loads).
    CHECK(torchvision_layout({3, 4, 6, 3}, 1000).size() == 218);
  }
  {  // Missing, unexpected, misshaped and non-float32 tensors name the file and key.
    test::TempDir dir;
    const std::string file = dir.file("weights.safetensors");
    const Tensor conv1 = zeros({64, 3, 7, 7});
    const Tensor before = small_net().conv1.weight.clone();

    safetensors::save(file, {{"conv1.weight", conv1}, {"layer1.0.conv3.weight", zeros({64, 64, 3, 3})}});
    test::check_contains(load_error(file), {file, "unexpected", "'layer1.0.conv3.weight'"});

    safetensors::save(file, {{"conv1.weight", conv1}, {"layer1.0.downsample.0.weight", zeros({64, 64, 1, 1})}});
    test::check_contains(load_error(file), {file, "unexpected", "'layer1.0.downsample.0.weight'"});

    safetensors::save(file, {{"conv1.weight", conv1}, {"fc.weight", zeros({1000, 512})}});
    test::check_contains(load_error(file), {file, "'fc.weight'", "[1000, 512]", "expected [10, 512]"});

    safetensors::save(file, {{"conv1.weight", conv1.to(DType::f16)}});
    test::check_contains(load_error(file), {file, "'conv1.weight'", "float32"});

    // A counter is accepted, and absent counters are not missing: only the other tensors are.
    int64_t others = 0;
    for (const auto& [name, t] : small_net().state_dict()) others += !name.ends_with("num_batches_tracked");
    safetensors::save(file, {{"conv1.weight", conv1}, {"bn1.num_batches_tracked", zeros({}, {DType::i64})}});
    const std::string missing = load_error(file);
    test::check_contains(missing, {file, cat("missing ", others - 1, " tensor(s)"), "'bn1.bias'", "more",
                                   "convert_resnet34.py"});
    CHECK(missing.find("'conv1.weight'") == std::string::npos);
    // Nothing was copied from a refused file.
    CHECK(amax(abs(small_net().conv1.weight - before)).item<double>() == 0.0);
  }
  {  // A torchvision state dict loads, num_batches_tracked included.
    BasicResNet& net = small_net();
    test::TempDir dir;
    std::vector<std::pair<std::string, Tensor>> state;
    for (const auto& [name, t] : net.state_dict())  // new values, an offset of its own per tensor
      state.emplace_back(name, name.ends_with("num_batches_tracked") ? full({}, 7.0, {DType::i64})
                                                                     : t * 1.25 + 0.01 * double(state.size() + 1));
    const std::string file = dir.file("resnet.safetensors");
    safetensors::save(file, state);
    load_torchvision_weights(net, file);
    std::map<std::string, Tensor> now;
    for (const auto& [name, t] : net.state_dict()) now[name] = t;
    for (const auto& [name, t] : state)
      if (!name.ends_with("num_batches_tracked")) REQUIRE(amax(abs(now.at(name) - t)).item<double>() == 0.0);
  }
}
