// Loads a ResNet-34 state dict (torchvision's names, a safetensors file) strictly into
// nn::ResNet34, runs it in eval mode on a batch of images, and writes what qkvlab computes: the
// pooled features [N, 512] and the logits [N, 1000]. check_resnet.py writes the inputs from
// torchvision and compares the outputs.
//
//   resnet_dump WEIGHTS.safetensors IMAGES.safetensors OUT.safetensors
//   (IMAGES holds one tensor "images" [N, 3, H, W]; OUT gets "features" and "logits")
#include <cstdio>
#include <exception>

#include "io/safetensors.h"
#include "nn/models/resnet.h"

using namespace qkv;

namespace {

Tensor load_images(const std::string& path) {
  const auto tensors = safetensors::load(path);
  const auto it = tensors.find("images");
  check<ValueError>(it != tensors.end(), path, ": no tensor named 'images'");
  return it->second.to(DType::f32);
}

void run(const std::string& weights, const std::string& images, const std::string& out) {
  nn::ResNet34 model;
  model.load(weights);
  const Tensor x = load_images(images);
  NoGradGuard no_grad;
  const Tensor features = model.features(x);
  const Tensor logits = model.fc.forward(features);
  safetensors::save(out, {{"features", features}, {"logits", logits}});
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: resnet_dump WEIGHTS.safetensors IMAGES.safetensors OUT.safetensors\n");
    return 2;
  }
  try {
    run(argv[1], argv[2], argv[3]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "resnet_dump: %s\n", e.what());
    return 1;
  }
  return 0;
}
