// The smallest ResNet of BasicBlocks (stages of one block, 10 classes, about 5M parameters),
// built once per test binary: its random init takes a noticeable part of a second. Tests that
// load weights into it leave it changed.
#pragma once
#include "nn/models/resnet.h"

namespace qkv::test {

inline nn::BasicResNet& small_resnet() {
  static Generator gen(1);
  static nn::BasicResNet net({1, 1, 1, 1}, 10, &gen);
  return net;
}

}  // namespace qkv::test
