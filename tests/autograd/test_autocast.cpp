// Autocast (autograd/autocast.h): the op table's amp column decides each op's dtypes under an
// AutocastGuard, casts are graph ops (float32 leaves get float32 gradients), backward never
// autocasts, and without a guard nothing is cast.
#include <doctest/doctest.h>

#include <cmath>

#include "autograd/autocast.h"
#include "autograd/ops.h"

using namespace qkv;

namespace {

Tensor randn_f32(const Shape& s, uint64_t seed) {
  Generator g(seed);
  return randn(s, {DType::f32, kCPU}, &g);
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}

}  // namespace

TEST_CASE("autocast: low ops run in bf16, fp32 ops in float32, keep ops promote mixed inputs") {
  const Tensor a = randn_f32({4, 8}, 1), b = randn_f32({8, 3}, 2), bias = randn_f32({3}, 3);
  AutocastGuard guard(DType::bf16);
  REQUIRE(autocast_dtype() == DType::bf16);
  const Tensor y = matmul(a, b);
  CHECK(y.dtype() == DType::bf16);                         // kAmpLow
  CHECK(softmax(y).dtype() == DType::f32);                 // kAmpF32
  CHECK(relu(y).dtype() == DType::bf16);                   // kAmpKeep, one dtype
  CHECK((y + bias).dtype() == DType::f32);                 // bf16 [4,3] + f32 [3]: the widest
  CHECK((y * scalar_tensor(0.5)).dtype() == DType::bf16);  // a 0-dim operand follows the tensor
  const Tensor a64 = a.to(DType::f64), b64 = b.to(DType::f64);
  CHECK(matmul(a64, b64).dtype() == DType::f64);  // float64 is never lowered
  {
    AutocastGuard off(std::nullopt);
    CHECK(matmul(a, b).dtype() == DType::f32);
  }
  CHECK(autocast_dtype() == DType::bf16);  // restored by the inner guard
}

TEST_CASE("autocast: without a guard nothing is cast and mixed dtypes stay an error") {
  CHECK_FALSE(autocast_dtype().has_value());
  const Tensor y = randn_f32({2, 3}, 4).to(DType::bf16), z = randn_f32({2, 3}, 5);
  CHECK_THROWS_AS((void)(y + z), DTypeError);
  CHECK_THROWS_AS(AutocastGuard(DType::f32), DTypeError);
}

TEST_CASE("autocast: float32 leaves get float32 gradients close to the float32 run's") {
  const Tensor x = randn_f32({16, 32}, 6);
  Tensor w = randn_f32({32, 32}, 7).set_requires_grad();
  Tensor v = randn_f32({32, 8}, 8).set_requires_grad();
  auto loss_of = [&] {
    const Tensor z = matmul(gelu(matmul(x, w)), v);
    return mean(z * z);
  };

  const Tensor ref = loss_of();
  ref.backward();
  const Tensor gw = w.grad().clone(), gv = v.grad().clone();
  w.zero_grad();
  v.zero_grad();

  Tensor low;
  {
    AutocastGuard guard(DType::bf16);
    low = loss_of();
  }
  CHECK(low.dtype() == DType::f32);  // mean runs in float32
  low.backward();
  REQUIRE(w.grad().dtype() == DType::f32);
  REQUIRE(v.grad().dtype() == DType::f32);
  CHECK(std::abs(low.item<double>() - ref.item<double>()) < 0.02 * std::abs(ref.item<double>()) + 1e-3);
  const double scale_w = max_abs_diff(gw, zeros_like(gw)), scale_v = max_abs_diff(gv, zeros_like(gv));
  CHECK(max_abs_diff(w.grad(), gw) < 0.05 * scale_w);
  CHECK(max_abs_diff(v.grad(), gv) < 0.05 * scale_v);
  CHECK(max_abs_diff(w.grad(), gw) > 0);  // it did compute in bf16
}

TEST_CASE("autocast: backward inside a guard does not autocast") {
  const Tensor x = randn_f32({3, 4}, 10);
  Tensor w = randn_f32({4, 4}, 9).set_requires_grad();
  sum(matmul(x, w)).backward();  // float32 forward and backward
  const std::vector<float> want = w.grad().to_vector<float>();
  w.zero_grad();
  const Tensor y = sum(matmul(x, w));  // float32 forward ...
  AutocastGuard guard(DType::f16);
  y.backward();  // ... whose backward matmuls stay float32 under the guard
  REQUIRE(w.grad().dtype() == DType::f32);
  CHECK(w.grad().to_vector<float>() == want);
  CHECK(autocast_dtype() == DType::f16);
}
