// The CPU matmul's two engines (kernels/cpu/library_gemm.h): the GEMM library (oneDNN) and
// Eigen must both equal a float64 product of the same operands, in every layout the kernel
// reads in place (transposed views, row-strided slices, broadcast weights, folded batches);
// bfloat16 products accumulate in float32 and round once, so each output is within one bf16
// rounding of the float64 product of the bf16 inputs, with the library or without it.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "kernels/cpu/library_gemm.h"
#include "kernels/cpu/skinny_gemm.h"

using namespace qkv;

namespace {

// Restores the library switch when a test leaves.
struct LibrarySwitch {
  bool previous;
  explicit LibrarySwitch(bool on) : previous(kernels::cpu::set_library_gemm(on)) {}
  ~LibrarySwitch() { kernels::cpu::set_library_gemm(previous); }
};

// The product in float64 of the same (possibly bf16) values.
Tensor reference(const Tensor& a, const Tensor& b, bool ta, bool tb) {
  return matmul(a.to(DType::f64), b.to(DType::f64), ta, tb);
}

// max |x - r| / (|r| + 1) over the elements.
double worst_relative(const Tensor& x, const Tensor& r) {
  const std::vector<double> xs = x.to_vector<double>(), rs = r.to_vector<double>();
  double worst = 0;
  for (size_t i = 0; i < xs.size(); ++i) worst = std::max(worst, std::abs(xs[i] - rs[i]) / (std::abs(rs[i]) + 1));
  return worst;
}

struct Case {
  std::string name;
  Tensor a, b;
  bool ta, tb;
};

std::vector<Case> layouts(Generator& gen) {
  std::vector<Case> cs;
  cs.push_back({"plain 96x200 @ 200x130", randn({96, 200}, {}, &gen), randn({200, 130}, {}, &gen), false, false});
  cs.push_back({"a^T", randn({200, 96}, {}, &gen), randn({200, 130}, {}, &gen), true, false});
  cs.push_back({"b^T (a linear layer)", randn({96, 200}, {}, &gen), randn({130, 200}, {}, &gen), false, true});
  cs.push_back({"a^T b (a weight gradient)", randn({300, 64}, {}, &gen), randn({300, 72}, {}, &gen), true, false});
  cs.push_back({"transposed views", randn({200, 96}, {}, &gen).transpose(0, 1),
                randn({130, 200}, {}, &gen).transpose(0, 1), false, false});
  cs.push_back(
      {"row-strided slice", randn({96, 400}, {}, &gen).narrow(1, 100, 200), randn({200, 130}, {}, &gen), false, false});
  cs.push_back(
      {"batches folded into one GEMM", randn({3, 40, 200}, {}, &gen), randn({200, 64}, {}, &gen), false, false});
  cs.push_back({"batched, both sides", randn({4, 48, 64}, {}, &gen), randn({4, 72, 64}, {}, &gen), false, true});
  cs.push_back({"matrix-vector", randn({1, 768}, {}, &gen), randn({1000, 768}, {}, &gen), false, true});
  cs.push_back({"empty inner dim", randn({40, 0}, {}, &gen), randn({0, 50}, {}, &gen), false, false});
  return cs;
}

}  // namespace

TEST_CASE("cpu matmul: the GEMM library and Eigen both equal a float64 product in every layout") {
  NoGradGuard no_grad;
  Generator gen(7);
  for (const Case& c : layouts(gen)) {
    CAPTURE(c.name);
    const Tensor r = reference(c.a, c.b, c.ta, c.tb);
    for (bool library : {false, true}) {
      CAPTURE(library);
      LibrarySwitch on(library);
      const Tensor y = matmul(c.a, c.b, c.ta, c.tb);
      CHECK(y.shape() == r.shape());
      CHECK(worst_relative(y, r) < 1e-5);
    }
  }
  MESSAGE("float32 GEMMs: ", kernels::cpu::library_gemm_description());
}

TEST_CASE("cpu matmul in bfloat16: float32 accumulation rounded once, with the library or without") {
  NoGradGuard no_grad;
  Generator gen(8);
  const double bf16_rounding = std::ldexp(1.0, -8);  // bf16's 8 significant bits: one rounding's relative error
  for (const Case& c : layouts(gen)) {
    CAPTURE(c.name);
    const Tensor a = c.a.to(DType::bf16), b = c.b.to(DType::bf16);
    const Tensor r = reference(a, b, c.ta, c.tb);
    for (bool library : {false, true}) {
      CAPTURE(library);
      LibrarySwitch on(library);
      const Tensor y = matmul(a, b, c.ta, c.tb);
      REQUIRE(y.dtype() == DType::bf16);
      // Rounding the float32 sum once costs at most 2^-8 of it; float32 accumulation adds ~1e-6.
      CHECK(worst_relative(y, r) <= bf16_rounding + 1e-5);
    }
  }
  MESSAGE("bf16 GEMMs through the library: ",
          kernels::cpu::library_bf16_gemm_enabled() ? "yes" : "no (float32 copies)");
}

TEST_CASE("cpu linear in bfloat16: the bias is added in float32 before the one rounding") {
  NoGradGuard no_grad;
  Generator gen(9);
  const Tensor x = randn({64, 96}, {}, &gen).to(DType::bf16), w = randn({80, 96}, {}, &gen).to(DType::bf16);
  const Tensor b = (randn({80}, {}, &gen) * 100.0).to(DType::bf16);  // large, so an early rounding would show
  const Tensor r = reference(x, w, false, true) + b.to(DType::f64);
  const Tensor y = linear(x, w, b);
  REQUIRE(y.dtype() == DType::bf16);
  CHECK(worst_relative(y, r) <= std::ldexp(1.0, -8) + 1e-5);
  // The bias gradient is summed in float32: 64 rows of ones sum to 64 exactly.
  const auto [dw, db] = linear_weight_grad(ones({64, 80}, {DType::bf16}), x);
  CHECK(db.to_vector<double>() == std::vector<double>(80, 64.0));
  CHECK(worst_relative(dw, reference(ones({64, 80}, {DType::bf16}), x, true, false)) <= std::ldexp(1.0, -8) + 1e-5);
}

TEST_CASE("skinny x W^T kernel (decode-sized products) equals a float64 product") {
  // Rows 1 to 16 (one or two passes of eight), columns that do not fill a pass of three or a
  // task, inner sizes with a masked tail, rows of a and b further apart than K, with a bias.
  Generator gen(11);
  for (const int64_t M : {1, 3, 8, 9, 16})
    for (const int64_t N : {1, 2, 67, 133})
      for (const int64_t K : {5, 37, 768, 1021}) {  // 1021: rows of a 4 KB apart (K + 3), read from a padded copy
        CAPTURE(M);
        CAPTURE(N);
        CAPTURE(K);
        const Tensor a = randn({M, K + 3}, {}, &gen), b = randn({N, K + 5}, {}, &gen), bias = randn({N}, {}, &gen);
        std::vector<float> c(size_t(M * N), -1.0f);
        kernels::cpu::skinny_gemm_nt(a.data<float>(), K + 3, b.data<float>(), K + 5, c.data(), M, N, K,
                                     bias.data<float>());
        const std::vector<double> av = a.to_vector<double>(), bv = b.to_vector<double>(), bb = bias.to_vector<double>();
        double worst = 0;
        for (int64_t i = 0; i < M; ++i)
          for (int64_t j = 0; j < N; ++j) {
            double want = bb[size_t(j)];
            for (int64_t k = 0; k < K; ++k) want += av[size_t(i * (K + 3) + k)] * bv[size_t(j * (K + 5) + k)];
            worst = std::max(worst, std::abs(double(c[size_t(i * N + j)]) - want) / (std::abs(want) + 1));
          }
        CHECK(worst < 2e-6 * std::sqrt(double(K)));
      }
}
