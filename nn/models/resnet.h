// ResNet-34 as torchvision.models.resnet34 builds it, and the layers it is made of: Conv2d,
// BatchNorm2d, BasicBlock and the residual stages. Parameter and buffer names are torchvision's
// ("conv1.weight", "bn1.running_mean", "layer2.0.downsample.0.weight", "fc.bias", ...), so a
// torchvision state dict saved as safetensors loads with strict=true.
//
// Inference only: BatchNorm2d normalizes with its running statistics and refuses to run in
// training mode (batch statistics and their updates are not implemented). The ResNet models are
// put in eval mode on construction; gradients still flow (to the input and the parameters, with
// the statistics held fixed), but wrap pure feature extraction in NoGradGuard so no graph is
// kept.
#pragma once
#include <array>
#include <memory>
#include <string>
#include <vector>

#include "nn/layers.h"

namespace qkv::nn {

// y = conv2d(x, weight, bias) with weight [out, in, k, k]. Init as torch.nn.Conv2d:
// U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weight and bias, fan_in = in k k.
class Conv2d : public Module {
 public:
  Conv2d(int64_t in, int64_t out, int64_t kernel, int64_t stride = 1, int64_t padding = 0, bool bias = true,
         Generator* gen = nullptr);
  Tensor forward(const Tensor& x) const;  // [N, in, H, W] -> [N, out, Ho, Wo]
  Tensor weight, bias;                    // bias undefined without one
  std::array<int64_t, 2> stride, padding;
};

// Batch norm over the channels of [N, C, H, W] with the running statistics (inference form).
// Buffers as torch.nn.BatchNorm2d: running_mean (0), running_var (1) and num_batches_tracked
// (int64, 0-dim; kept only so that state dicts match). Parameters weight (1) and bias (0).
class BatchNorm2d : public Module {
 public:
  explicit BatchNorm2d(int64_t channels, double eps = 1e-5);
  Tensor forward(const Tensor& x) const;  // throws in training mode
  Tensor weight, bias, running_mean, running_var, num_batches_tracked;
  double eps;
};

// The shortcut of a block that changes resolution or width: 1x1 conv then batch norm, named
// "0" and "1" as torchvision's nn.Sequential.
class Downsample : public Module {
 public:
  Downsample(int64_t in, int64_t out, int64_t stride, Generator* gen);
  Tensor forward(const Tensor& x) const;
  Conv2d conv;
  BatchNorm2d bn;
};

// relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)); conv1 carries the stride.
class BasicBlock : public Module {
 public:
  BasicBlock(int64_t in, int64_t out, int64_t stride, Generator* gen);
  Tensor forward(const Tensor& x) const;
  Conv2d conv1;
  BatchNorm2d bn1;
  Conv2d conv2;
  BatchNorm2d bn2;
  std::unique_ptr<Downsample> downsample;  // null when the shape is kept
};

// One stage ("layer1" ... "layer4"): blocks named "0", "1", ...; the first one may downsample.
class ResStage : public Module {
 public:
  ResStage(int64_t in, int64_t out, int64_t blocks, int64_t stride, Generator* gen);
  Tensor forward(const Tensor& x) const;
  std::vector<std::unique_ptr<BasicBlock>> blocks;
};

// A ResNet of BasicBlocks (torchvision's ResNet with BasicBlock): conv1 7x7/2 pad 3, bn1, relu,
// max pool 3/2 pad 1, four stages of widths 64, 128, 256, 512 (strides 1, 2, 2, 2), global
// average pool, fc. Conv weights are initialized as torchvision does (kaiming normal, fan_out,
// relu gain), batch norms to the identity, fc as Linear.
class BasicResNet : public Module {
 public:
  BasicResNet(const std::array<int64_t, 4>& blocks, int64_t num_classes, Generator* gen);
  // images [N, 3, H, W] -> pooled features [N, 512] (the input of fc).
  Tensor features(const Tensor& x) const;
  // images [N, 3, H, W] -> logits [N, num_classes].
  Tensor forward(const Tensor& x) const;
  Conv2d conv1;
  BatchNorm2d bn1;
  ResStage layer1, layer2, layer3, layer4;
  Linear fc;
};

// torchvision.models.resnet34: stages of 3, 4, 6 and 3 blocks; 21,797,672 parameters with
// 1000 classes.
class ResNet34 : public BasicResNet {
 public:
  explicit ResNet34(int64_t num_classes = 1000, Generator* gen = nullptr);
};

// Loads a torchvision state dict saved as safetensors (scripts/convert_resnet34.py) into `net`:
// exactly the model's names and shapes, float32. The bn*.num_batches_tracked counters may be
// present or not and are ignored (only training reads them). IOError naming the file and the
// keys for missing, unexpected, misshaped or non-float32 tensors.
void load_torchvision_weights(BasicResNet& net, const std::string& path);

}  // namespace qkv::nn
