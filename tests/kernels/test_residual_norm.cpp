// The CPU's fused residual step (kernels/cpu/residual_norm.cpp: dropout, add and layer norm in one
// pass over the rows) against the three unfused ops: the same bits, for rows that cross the
// random-word batches, with and without the affine parameters, in float32 and float64.
#include <doctest/doctest.h>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"

using namespace qkv;

TEST_CASE("cpu dropout_add_layer_norm is dropout, add and layer_norm bit for bit") {
  NoGradGuard no_grad;
  for (const DType dt : {DType::f32, DType::f64})
    for (const int64_t n : {64, 100, 300})
      for (const bool affine : {true, false}) {
        CAPTURE(dtype_name(dt));
        CAPTURE(n);
        CAPTURE(affine);
        Generator data(5);
        const Tensor x = randn({7, n}, {dt}, &data), y = randn({7, n}, {dt}, &data);
        const Tensor w = affine ? randn({n}, {dt}, &data) : Tensor(), b = affine ? randn({n}, {dt}, &data) : Tensor();
        Generator g1(9), g2(9);
        g1.reserve(3);  // a stream that starts mid-way
        g2.reserve(3);
        const AddNorm fused = dropout_add_layer_norm(x, y, w, b, 0.3, true, &g1, 1e-5);
        const Tensor sum = x + dropout(y, 0.3, true, &g2);
        const Tensor normed = layer_norm(sum, w, b, 1e-5);
        CHECK(fused.sum.to(DType::f64).to_vector<double>() == sum.to(DType::f64).to_vector<double>());
        CHECK(fused.normed.to(DType::f64).to_vector<double>() == normed.to(DType::f64).to_vector<double>());
      }
}
