// Unit tests of nn/models/resnet.h (ResNet-34 as torchvision builds it) and of the image ops'
// error messages: parameter count and names, output shapes, eval-only batch norm, strict
// loading that names the missing or mis-shaped entry, and a save/load round trip.
#include <doctest/doctest.h>

#include <filesystem>
#include <set>

#include "nn/models/resnet.h"

using namespace qkv;
using namespace qkv::nn;

namespace {

std::map<std::string, Tensor> state_map(const Module& m) {
  std::map<std::string, Tensor> s;
  for (auto& [name, t] : m.state_dict()) s[name] = t;
  return s;
}

double max_abs_diff(const Tensor& a, const Tensor& b) { return amax(abs(a - b)).item<double>(); }

}  // namespace

TEST_CASE("resnet: ResNet34 has torchvision's parameter count and state dict names") {
  ResNet34 model;
  CHECK(model.num_parameters() == 21797672);
  const auto state = state_map(model);
  CHECK(state.size() == 218);  // len(torchvision.models.resnet34().state_dict())
  for (const char* name :
       {"conv1.weight", "bn1.weight", "bn1.running_mean", "bn1.running_var", "bn1.num_batches_tracked",
        "layer1.0.conv1.weight", "layer1.2.bn2.bias", "layer2.0.downsample.0.weight", "layer2.0.downsample.1.weight",
        "layer2.0.downsample.1.running_var", "layer3.5.conv2.weight", "layer4.2.bn2.running_mean", "fc.weight",
        "fc.bias"})
    CHECK_MESSAGE(state.count(name) == 1, name);
  CHECK(state.count("layer1.0.downsample.0.weight") == 0);  // layer1 keeps width and resolution
  CHECK(state.count("layer2.1.downsample.0.weight") == 0);
  CHECK(state.at("layer2.0.downsample.0.weight").shape() == Shape{128, 64, 1, 1});
  CHECK(state.at("conv1.weight").shape() == Shape{64, 3, 7, 7});
  CHECK(state.at("fc.weight").shape() == Shape{1000, 512});
  CHECK(state.at("bn1.num_batches_tracked").dtype() == DType::i64);
  CHECK(state.at("bn1.num_batches_tracked").dim() == 0);
  for (auto& [name, t] : model.named_buffers()) CHECK_FALSE(t.requires_grad());
}

TEST_CASE("resnet: features are [N, 512] and logits [N, classes] for any image size") {
  Generator gen(3);
  ResNet34 model(10, &gen);
  CHECK_FALSE(model.is_training());  // constructed in eval mode
  NoGradGuard no_grad;
  for (int64_t size : {32, 64, 45}) {
    const Tensor x = randn({2, 3, size, size}, {}, &gen);
    CHECK(model.features(x).shape() == Shape{2, 512});
    CHECK(model.forward(x).shape() == Shape{2, 10});
  }
  CHECK_THROWS_WITH_AS(model.features(randn({2, 1, 32, 32})), doctest::Contains("[2, 1, 32, 32]"), ShapeError);
}

TEST_CASE("resnet: BatchNorm2d normalizes with the running statistics and refuses training mode") {
  BatchNorm2d bn(3, 1e-3);
  {
    NoGradGuard ng;
    bn.running_mean.copy_(from_vector<float>({0.5f, -1.0f, 2.0f}));
    bn.running_var.copy_(from_vector<float>({4.0f, 0.25f, 1.0f}));
    bn.weight.copy_(from_vector<float>({2.0f, 1.0f, -1.0f}));
    bn.bias.copy_(from_vector<float>({0.0f, 1.0f, 3.0f}));
  }
  const Tensor x = randn({2, 3, 4, 5});
  CHECK_THROWS_WITH_AS(bn.forward(x), doctest::Contains("call eval()"), ValueError);
  bn.eval();
  const Tensor y = bn.forward(x);
  const Tensor mean = bn.running_mean.reshape({1, 3, 1, 1}), var = bn.running_var.reshape({1, 3, 1, 1});
  const Tensor want = (x - mean) / sqrt(var + 1e-3) * bn.weight.reshape({1, 3, 1, 1}) + bn.bias.reshape({1, 3, 1, 1});
  CHECK(max_abs_diff(y, want) < 1e-5);
}

TEST_CASE("resnet: loading a state dict with a missing or mis-shaped entry fails naming it") {
  Generator gen(1);
  ResNet34 a(1000, &gen), b(1000, &gen);
  auto state = state_map(a);
  state.erase("layer3.1.bn2.running_var");
  CHECK_THROWS_WITH_AS(b.load_state_dict(state), doctest::Contains("'layer3.1.bn2.running_var' is missing"),
                       ValueError);
  state = state_map(a);
  state["layer2.0.downsample.0.weight"] = zeros({128, 64, 3, 3});
  CHECK_THROWS_WITH_AS(b.load_state_dict(state),
                       doctest::Contains("'layer2.0.downsample.0.weight' has shape [128, 64, 3, 3]"), ShapeError);
  state = state_map(a);
  state.erase("fc.bias");
  CHECK_THROWS_WITH_AS(b.load_state_dict(state), doctest::Contains("'fc.bias' is missing"), ValueError);
}

TEST_CASE("resnet: a saved ResNet34 loads into another and computes the same logits") {
  Generator gen(2);
  ResNet34 a(1000, &gen), b(1000, &gen);
  {
    NoGradGuard ng;
    a.layer2.blocks[0]->downsample->bn.running_var.copy_(rand({128}, {}, &gen) + 0.5);
    a.bn1.num_batches_tracked.copy_(full({}, 7, {DType::i64}));
  }
  const std::string path = (std::filesystem::temp_directory_path() / "qkvlab-resnet34.safetensors").string();
  a.save(path);
  b.load(path);
  std::filesystem::remove(path);
  CHECK(b.bn1.num_batches_tracked.item<int64_t>() == 7);
  NoGradGuard ng;
  const Tensor x = randn({1, 3, 32, 32}, {}, &gen);
  CHECK(max_abs_diff(a.forward(x), b.forward(x)) == 0.0);
}

TEST_CASE("resnet: image ops name the op and the shapes in their errors") {
  const Tensor x = randn({2, 3, 6, 5});
  CHECK_THROWS_WITH_AS(conv2d(x, randn({4, 2, 3, 3})),
                       doctest::Contains("conv2d: weight float32 [4, 2, 3, 3] expects 2 input channels, but input "
                                         "float32 [2, 3, 6, 5] has 3"),
                       ShapeError);
  CHECK_THROWS_WITH_AS(conv2d(x, randn({4, 3, 7, 7})),
                       doctest::Contains("conv2d: kernel 7x7 is larger than the padded input 6x5"), ShapeError);
  CHECK_THROWS_WITH_AS(conv2d(x, randn({4, 3, 3, 3}), randn({3})),
                       doctest::Contains("conv2d: bias must have shape [4]"), ShapeError);
  CHECK_THROWS_WITH_AS(conv2d(x, randn({4, 3, 3, 3}, {DType::f64})), doctest::Contains("conv2d: dtype mismatch"),
                       DTypeError);
  CHECK_THROWS_WITH_AS(conv2d(randn({3, 6, 5}), randn({4, 3, 3, 3})),
                       doctest::Contains("conv2d: expected input [N, C, H, W], got float32 [3, 6, 5]"), ShapeError);
  CHECK_THROWS_WITH_AS(batch_norm(x, zeros({4}), ones({3}), Tensor(), Tensor()),
                       doctest::Contains("batch_norm: running_mean must have shape [3]"), ShapeError);
  CHECK_THROWS_WITH_AS(max_pool2d(x, {2, 2}, {2, 2}, {2, 2}),
                       doctest::Contains("max_pool2d: padding (2, 2) must be at most half"), ValueError);
  CHECK_THROWS_WITH_AS(adaptive_avg_pool2d(x, {0, 1}),
                       doctest::Contains("adaptive_avg_pool2d: output size must be positive"), ValueError);
}
