// ResNet-34 and its layers (nn/models/resnet.h).
#include "nn/models/resnet.h"

#include <cmath>
#include <map>
#include <set>
#include <string>

#include "io/safetensors.h"
#include "nn/init.h"

namespace qkv::nn {

Conv2d::Conv2d(int64_t in, int64_t out, int64_t kernel, int64_t s, int64_t p, bool with_bias, Generator* gen)
    : stride{s, s}, padding{p, p} {
  check<ValueError>(in > 0 && out > 0 && kernel > 0, "Conv2d: sizes must be positive, got in=", in, " out=", out,
                    " kernel=", kernel);
  const double bound = 1.0 / std::sqrt(double(in * kernel * kernel));
  weight = init_uniform({out, in, kernel, kernel}, bound, kCPU, gen);
  register_parameter("weight", &weight);
  if (with_bias) {
    bias = init_uniform({out}, bound, kCPU, gen);
    register_parameter("bias", &bias);
  }
}

Tensor Conv2d::forward(const Tensor& x) const { return conv2d(x, weight, bias, stride, padding); }

BatchNorm2d::BatchNorm2d(int64_t channels, double eps_) : eps(eps_) {
  check<ValueError>(channels > 0, "BatchNorm2d: channels must be positive, got ", channels);
  weight = ones({channels});
  bias = zeros({channels});
  running_mean = zeros({channels});
  running_var = ones({channels});
  num_batches_tracked = zeros({}, {DType::i64});
  register_parameter("weight", &weight);
  register_parameter("bias", &bias);
  register_buffer("running_mean", &running_mean);
  register_buffer("running_var", &running_var);
  register_buffer("num_batches_tracked", &num_batches_tracked);
}

Tensor BatchNorm2d::forward(const Tensor& x) const {
  check<ValueError>(!is_training(),
                    "BatchNorm2d: training mode (batch statistics) is not implemented; call eval() "
                    "to normalize with the running statistics");
  check<ShapeError>(x.dim() == 4, "BatchNorm2d: expected input [N, C, H, W], got ", shape_str(x.shape()));
  return batch_norm(x, running_mean, running_var, weight, bias, eps);
}

Downsample::Downsample(int64_t in, int64_t out, int64_t stride, Generator* gen)
    : conv(in, out, 1, stride, 0, /*bias=*/false, gen), bn(out) {
  register_module("0", &conv);
  register_module("1", &bn);
}

Tensor Downsample::forward(const Tensor& x) const { return bn.forward(conv.forward(x)); }

BasicBlock::BasicBlock(int64_t in, int64_t out, int64_t stride, Generator* gen)
    : conv1(in, out, 3, stride, 1, /*bias=*/false, gen),
      bn1(out),
      conv2(out, out, 3, 1, 1, /*bias=*/false, gen),
      bn2(out) {
  register_module("conv1", &conv1);
  register_module("bn1", &bn1);
  register_module("conv2", &conv2);
  register_module("bn2", &bn2);
  if (stride != 1 || in != out) {
    downsample = std::make_unique<Downsample>(in, out, stride, gen);
    register_module("downsample", downsample.get());
  }
}

Tensor BasicBlock::forward(const Tensor& x) const {
  Tensor y = bn2.forward(conv2.forward(relu(bn1.forward(conv1.forward(x)))));
  return relu(y + (downsample ? downsample->forward(x) : x));
}

ResStage::ResStage(int64_t in, int64_t out, int64_t n, int64_t stride, Generator* gen) {
  check<ValueError>(n > 0, "ResStage: a stage needs at least one block, got ", n);
  for (int64_t i = 0; i < n; ++i) {
    blocks.push_back(std::make_unique<BasicBlock>(i == 0 ? in : out, out, i == 0 ? stride : 1, gen));
    register_module(std::to_string(i), blocks.back().get());
  }
}

Tensor ResStage::forward(const Tensor& x) const {
  Tensor y = x;
  for (const auto& b : blocks) y = b->forward(y);
  return y;
}

namespace {
// torchvision's ResNet init for conv weights: N(0, sqrt(2 / fan_out)), fan_out = out k k.
void kaiming_conv_weights(Module& m, Generator* gen) {
  NoGradGuard no_grad;
  for (auto& [name, p] : m.named_parameters()) {
    if (p.dim() != 4) continue;
    const double fan_out = double(p.size(0) * p.size(2) * p.size(3));
    p.copy_(init_normal(p.shape(), std::sqrt(2.0 / fan_out), p.device(), gen));
  }
}
}  // namespace

BasicResNet::BasicResNet(const std::array<int64_t, 4>& n, int64_t num_classes, Generator* gen)
    : conv1(3, 64, 7, 2, 3, /*bias=*/false, gen),
      bn1(64),
      layer1(64, 64, n[0], 1, gen),
      layer2(64, 128, n[1], 2, gen),
      layer3(128, 256, n[2], 2, gen),
      layer4(256, 512, n[3], 2, gen),
      fc(512, num_classes, /*bias=*/true, gen) {
  register_module("conv1", &conv1);
  register_module("bn1", &bn1);
  register_module("layer1", &layer1);
  register_module("layer2", &layer2);
  register_module("layer3", &layer3);
  register_module("layer4", &layer4);
  register_module("fc", &fc);
  kaiming_conv_weights(*this, gen);
  eval();
}

Tensor BasicResNet::features(const Tensor& x) const {
  check<ShapeError>(x.dim() == 4 && x.size(1) == 3, "ResNet: expected images [N, 3, H, W], got ", shape_str(x.shape()));
  Tensor y = max_pool2d(relu(bn1.forward(conv1.forward(x))), {3, 3}, {2, 2}, {1, 1}).values;
  y = layer4.forward(layer3.forward(layer2.forward(layer1.forward(y))));
  return adaptive_avg_pool2d(y, {1, 1}).reshape({x.size(0), 512});
}

Tensor BasicResNet::forward(const Tensor& x) const { return fc.forward(features(x)); }

ResNet34::ResNet34(int64_t num_classes, Generator* gen) : BasicResNet({3, 4, 6, 3}, num_classes, gen) {}

namespace {
bool is_batch_counter(const std::string& name) {
  return name.ends_with(".num_batches_tracked") || name == "num_batches_tracked";
}

// "a, b, c and 4 more"
std::string name_list(const std::vector<std::string>& names) {
  std::string s;
  for (size_t i = 0; i < names.size() && i < 5; ++i) s += cat(i ? ", " : "", "'", names[i], "'");
  if (names.size() > 5) s += cat(" and ", names.size() - 5, " more");
  return s;
}
}  // namespace

void load_torchvision_weights(BasicResNet& net, const std::string& path) {
  const std::map<std::string, Tensor> file = safetensors::load(path);
  const char* hint = " (expected torchvision's resnet state_dict names, as scripts/convert_resnet34.py writes them)";
  std::map<std::string, Tensor> slots;  // handles on the model's storage
  std::set<std::string> counters;       // the model's num_batches_tracked: allowed, not loaded
  for (auto& [name, t] : net.named_parameters()) slots.emplace(name, t);
  for (auto& [name, t] : net.named_buffers())
    if (is_batch_counter(name)) counters.insert(name);
    else slots.emplace(name, t);
  std::vector<std::string> missing, unexpected;
  for (const auto& [name, t] : file)
    if (!slots.count(name) && !counters.count(name)) unexpected.push_back(name);
  check<IOError>(unexpected.empty(), path, ": unexpected tensor(s) ", name_list(unexpected), hint);
  for (const auto& [name, slot] : slots) {
    auto it = file.find(name);
    if (it == file.end()) {
      missing.push_back(name);
      continue;
    }
    check<IOError>(it->second.shape() == slot.shape(), path, ": tensor '", name, "' has shape ",
                   shape_str(it->second.shape()), ", expected ", shape_str(slot.shape()));
    check<IOError>(it->second.dtype() == DType::f32, path, ": tensor '", name, "' is ", dtype_name(it->second.dtype()),
                   ", expected float32");
  }
  check<IOError>(missing.empty(), path, ": missing ", missing.size(), " tensor(s): ", name_list(missing), hint);
  NoGradGuard no_grad;
  for (auto& [name, slot] : slots) slot.copy_(file.at(name));
}

}  // namespace qkv::nn
