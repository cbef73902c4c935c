// Parameter initializers drawing from a Generator (the default one unless given), so a seeded
// run initializes identically on CPU and CUDA.
#pragma once
#include "tensor/random.h"
#include "tensor/tensor.h"

namespace qkv::nn {

// Tensors of `shape` (float32 on `device`) with the named distribution.
Tensor init_uniform(const Shape& shape, double bound, const Device& device = kCPU,
                    Generator* gen = nullptr);                                                              // U(-b, b)
Tensor init_normal(const Shape& shape, double std, const Device& device = kCPU, Generator* gen = nullptr);  // N(0, std)

}  // namespace qkv::nn
