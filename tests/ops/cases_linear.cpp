// Test cases for the linear layer ops: linear and linear_weight_grad. On CUDA the samples take
// cuBLASLt's epilogues (bias, bias gradient) where it has an algorithm for them, and the
// fallback (plain GEMM, then the bias kernel or the column sum) elsewhere: the harness's
// non-contiguous copies of the inputs and the odd sizes reach both.
#include "tests/ops/references.h"

namespace qkv::test {
namespace {

// y[..., m] = sum_k x[..., k] w[m, k] + b[m] (no b: 0), over the rows n of x's leading dims.
Ref affine(const std::vector<Ref>& in) {
  const Ref &x = in[0], &w = in[1], &b = in[2];
  const int64_t K = x.shape.back(), N = x.size() / std::max<int64_t>(K, 1), M = w.shape[0];
  Shape shape = x.shape;
  shape.back() = M;
  Ref out(shape);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t m = 0; m < M; ++m) {
      double s = b.v.empty() ? 0 : b.v[size_t(m)];
      for (int64_t k = 0; k < K; ++k) s += x.v[size_t(n * K + k)] * w.at({m, k});
      out.v[size_t(n * M + m)] = s;
    }
  return out;
}

}  // namespace

OpCase case_linear() {
  OpCase c;
  c.samples = {{"with bias", {real({5, 4}), real({3, 4}), real({3})}},
               {"no bias", {real({2, 3}), real({4, 3}), absent()}},
               {"epilogue shapes", {real({24, 16}), real({32, 16}), real({32})}},
               {"epilogue shapes, no bias", {real({16, 8}), real({16, 8}), absent()}},
               {"one row", {real({1, 8}), real({8, 8}), real({8})}},
               {"x [B, T, K]", {real({2, 3, 4}), real({5, 4}), real({5})}},
               {"x [B, T, K], no bias", {real({2, 3, 4}), real({5, 4}), absent()}},
               {"x [2, 2, 3, K], epilogue shapes", {real({2, 2, 3, 16}), real({24, 16}), real({24})}}};
  c.reference = [](const std::vector<Ref>& in, const Attrs&) { return std::vector<Ref>{affine(in)}; };
  return c;
}

OpCase case_linear_weight_grad() {
  OpCase c;
  c.samples = {{"small", {real({5, 3}), real({5, 4})}},
               {"epilogue shapes", {real({40, 16}), real({40, 24})}},
               {"one row", {real({1, 8}), real({1, 8})}}};
  c.gradcheck = false;
  c.reference = [](const std::vector<Ref>& in, const Attrs&) {
    const Ref &dy = in[0], &x = in[1];
    const int64_t N = dy.shape[0], M = dy.shape[1], K = x.shape[1];
    Ref dw({M, K}), db({M});
    for (int64_t m = 0; m < M; ++m) {
      double s = 0;
      for (int64_t n = 0; n < N; ++n) s += dy.at({n, m});
      db.at({m}) = s;
      for (int64_t k = 0; k < K; ++k) {
        double t = 0;
        for (int64_t n = 0; n < N; ++n) t += dy.at({n, m}) * x.at({n, k});
        dw.at({m, k}) = t;
      }
    }
    return std::vector<Ref>{dw, db};
  };
  return c;
}

OpCase case_matmul_accumulate() {
  OpCase c;
  // Small products (Eigen, then an add) and ones big enough for the library's sum post-op
  // (float32), in every layout of a and b; the harness passes them as non-contiguous views too.
  c.samples = {{"small", {real({3, 5}), real({3, 4}), real({4, 5})}, MatmulAttrs{}},
               {"small, both transposed", {real({3, 5}), real({4, 3}), real({5, 4})}, MatmulAttrs{true, true}},
               {"dy w (a linear's dx)", {real({48, 40}), real({48, 36}), real({36, 40})}, MatmulAttrs{}},
               {"a^T b", {real({40, 36}), real({48, 40}), real({48, 36})}, MatmulAttrs{true, false}},
               {"a b^T", {real({48, 40}), real({48, 36}), real({40, 36})}, MatmulAttrs{false, true}}};
  c.gradcheck = false;
  c.reference = [](const std::vector<Ref>& in, const Attrs& attrs) {
    const auto& f = std::get<MatmulAttrs>(attrs);
    const Ref &a = in[1], &b = in[2];
    Ref out = in[0];
    const int64_t K = f.trans_a ? a.shape[0] : a.shape[1];
    for_each_index(out.shape, [&](const std::vector<int64_t>& o) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k)
        s += (f.trans_a ? a.at({k, o[0]}) : a.at({o[0], k})) * (f.trans_b ? b.at({o[1], k}) : b.at({k, o[1]}));
      out.at(o) += s;
    });
    return std::vector<Ref>{out};
  };
  return c;
}

}  // namespace qkv::test
