// The CPU matmul's fast paths against a double-precision loop: batches sharing one weight folded
// into one taller product, and wide products split into column strips across threads (above
// 2^18 multiply-adds, so beyond the op harness's small shapes), for every transpose flag.
#include <doctest/doctest.h>

#include <cmath>

#include "autograd/autograd.h"

using namespace qkv;

namespace {

// a [..., M, K] (or its transpose), b [K, N] (or its transpose), both contiguous float64 copies.
double max_error(const Tensor& a, const Tensor& b, bool ta, bool tb) {
  Tensor y = matmul(a, b, ta, tb).to(DType::f64).contiguous();
  Tensor A = a.to(DType::f64).contiguous(), B = b.to(DType::f64).contiguous();
  const int64_t batches = a.numel() / (a.size(-1) * a.size(-2));
  const int64_t M = ta ? a.size(-1) : a.size(-2), K = ta ? a.size(-2) : a.size(-1), N = tb ? b.size(0) : b.size(1);
  const double* pa = A.data<double>();
  const double* pb = B.data<double>();
  const double* py = y.data<double>();
  double worst = 0;
  for (int64_t t = 0; t < batches; ++t)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k)
          s += pa[t * M * K + (ta ? k * M + i : i * K + k)] * pb[tb ? j * K + k : k * N + j];
        worst = std::max(worst, std::fabs(s - py[(t * M + i) * N + j]) / (1 + std::fabs(s)));
      }
  return worst;
}

}  // namespace

TEST_CASE("matmul: folded batches and thread-split wide products match a float64 loop") {
  Generator g(4);
  for (DType dt : {DType::f32, DType::f64}) {
    const double tol = dt == DType::f32 ? 1e-5 : 1e-12;
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        CAPTURE(dtype_name(dt));
        CAPTURE(ta);
        CAPTURE(tb);
        // 3 batches x [5, 64] against one [64, 2048] weight: folded, and wide enough to split.
        Tensor a = randn(ta ? Shape{3, 64, 5} : Shape{3, 5, 64}, dt, &g);
        Tensor b = randn(tb ? Shape{2048, 64} : Shape{64, 2048}, dt, &g);
        CHECK(max_error(a, b, ta, tb) < tol);
        // One row (a decoding step) against a wide weight.
        Tensor row = randn(ta ? Shape{96, 1} : Shape{1, 96}, dt, &g);
        Tensor w = randn(tb ? Shape{3000, 96} : Shape{96, 3000}, dt, &g);
        CHECK(max_error(row, w, ta, tb) < tol);
      }
  }
}
