#include "nn/init.h"

#include "autograd/ops.h"

namespace qkv::nn {

Tensor init_uniform(const Shape& shape, double bound, const Device& device, Generator* gen) {
  return uniform(shape, -bound, bound, {DType::f32, device}, gen);
}

Tensor init_normal(const Shape& shape, double std, const Device& device, Generator* gen) {
  return normal(shape, 0.0, std, {DType::f32, device}, gen);
}

}  // namespace qkv::nn
