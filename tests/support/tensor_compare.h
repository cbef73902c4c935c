// Comparing float32 tensors in tests.
#pragma once
#include <algorithm>
#include <cmath>
#include <doctest/doctest.h>

#include "tensor/tensor.h"

namespace qkv::test {

// The largest |a - b| over two float32 tensors of the same shape.
inline double max_abs_difference(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  const Tensor x = a.contiguous(), y = b.contiguous();
  double m = 0;
  for (int64_t i = 0; i < x.numel(); ++i) m = std::max(m, double(std::abs(x.data<float>()[i] - y.data<float>()[i])));
  return m;
}

}  // namespace qkv::test
