// Test cases for the fused attention op and its backward: multi-head, grouped and multi-query
// heads, causal masks (fewer queries than keys, and more, so that some rows see no key), a 2D
// score bias, and rows spanning more than one 64-key tile. The larger samples reach the CUDA
// kernels' multi-tile paths (several 32-row query tiles and 32-key tiles with ragged ends, GQA
// groups of 2 and 3, head dims that are not powers of two, up to 256); they skip the central
// differences (numeric_grad = false) but their gradients are still compared CUDA against CPU.
// The harness draws every input independently, so K = V as one tensor and q, k, v as permuted
// [B, T, H, D] views are covered by a test case of their own at the end.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <tuple>
#include <vector>

#include "autograd/autograd.h"
#include "tests/ops/references.h"

namespace qkv::test {
namespace {

AttentionAttrs attn(bool causal, int64_t head_dim) { return {causal, 1.0 / std::sqrt(double(head_dim))}; }

// Row i of head (b, h): the masked scores against every key (-inf where hidden).
std::vector<double> scores(const std::vector<Ref>& in, const AttentionAttrs& a, int64_t b, int64_t h, int64_t i) {
  const Ref &q = in[0], &k = in[1], &bias = in[3];
  const int64_t H = q.shape[1], Hk = k.shape[1], T = q.shape[2], S = k.shape[2], D = q.shape[3];
  const int64_t hk = h / (H / Hk);
  std::vector<double> s(static_cast<size_t>(S));
  for (int64_t j = 0; j < S; ++j) {
    double dot = 0;
    for (int64_t d = 0; d < D; ++d) dot += q.at({b, h, i, d}) * k.at({b, hk, j, d});
    s[size_t(j)] = a.scale * dot + (bias.v.empty() ? 0.0 : bias.at({i, j}));
    if (a.causal && j > i + S - T) s[size_t(j)] = -INFINITY;
  }
  return s;
}

double logsumexp(const std::vector<double>& s) {
  double m = -INFINITY, z = 0;
  for (double x : s) m = std::max(m, x);
  if (m == -INFINITY) return m;
  for (double x : s) z += std::exp(x - m);
  return m + std::log(z);
}

// A sample sized for the CUDA tiles: no central differences (they would take minutes).
Sample large(Sample s) {
  s.numeric_grad = false;
  return s;
}

std::vector<Sample> attention_samples() {
  auto qkv = [](Shape q, Shape k, Shape v) { return std::vector<InputSpec>{real(q), real(k), real(v), absent()}; };
  auto with_bias = [](Shape q, Shape k, Shape v, Shape b) {
    return std::vector<InputSpec>{real(q), real(k), real(v), real(b)};
  };
  return {{"multi-head", qkv({2, 2, 5, 3}, {2, 2, 5, 3}, {2, 2, 5, 4}), attn(false, 3)},
          {"causal with bias", with_bias({1, 2, 6, 3}, {1, 2, 6, 3}, {1, 2, 6, 3}, {6, 6}), attn(true, 3)},
          {"grouped heads", qkv({1, 4, 5, 3}, {1, 2, 5, 3}, {1, 2, 5, 3}), attn(false, 3)},
          {"multi-query, causal, 3 queries over 7 keys", qkv({2, 3, 3, 4}, {2, 1, 7, 4}, {2, 1, 7, 2}), attn(true, 4)},
          {"two key tiles, causal", with_bias({1, 1, 70, 2}, {1, 1, 70, 2}, {1, 1, 70, 2}, {70, 70}), attn(true, 2)},
          {"causal, 6 queries over 4 keys: rows that see no key",
           with_bias({1, 2, 6, 3}, {1, 1, 4, 3}, {1, 1, 4, 2}, {6, 4}), attn(true, 3)},
          // The CPU's fixed-width tile products (head widths 16, 32 and 64 in float32).
          large({"small head: D 16, GQA 2, causal, 2 batch rows, 70 queries over 100 keys, bias",
                 with_bias({2, 4, 70, 16}, {2, 2, 100, 16}, {2, 2, 100, 16}, {70, 100}), attn(true, 16)}),
          large({"small head: D 32, multi-query, 65 queries over 70 keys",
                 qkv({1, 3, 65, 32}, {1, 1, 70, 32}, {1, 1, 70, 32}), attn(false, 32)}),
          kernel_path({"tiles: GQA 2, causal, 77 queries over 45 keys, bias, D 20, Dv 12",
                       with_bias({2, 4, 77, 20}, {2, 2, 45, 20}, {2, 2, 45, 12}, {77, 45}), attn(true, 20)}),
          large({"tiles: multi-query, causal, 37 queries over 150 keys, D 24",
                 qkv({1, 2, 37, 24}, {1, 1, 150, 24}, {1, 1, 150, 24}), attn(true, 24)}),
          large({"tiles: GQA 3, 65 queries and keys, D 100, Dv 33",
                 qkv({1, 6, 65, 100}, {1, 2, 65, 100}, {1, 2, 65, 33}), attn(false, 100)}),
          large({"tiles: D 128, 40 queries over 70 keys, bias",
                 with_bias({1, 2, 40, 128}, {1, 2, 70, 128}, {1, 2, 70, 128}, {40, 70}), attn(false, 128)}),
          large({"tiles: D 256, causal, 33 queries over 40 keys",
                 qkv({1, 1, 33, 256}, {1, 1, 40, 256}, {1, 1, 40, 256}), attn(true, 256)}),
          large({"tiles: D 160, Dv 256, causal, 45 queries over 35 keys, bias",
                 with_bias({1, 2, 45, 160}, {1, 1, 35, 160}, {1, 1, 35, 256}, {45, 35}), attn(true, 160)}),
          // The tensor-core kernel's head dim 64 (bf16/f16 on CUDA), several query and key tiles.
          large({"tiles: D 64, GQA 2, causal, 100 queries over 130 keys",
                 qkv({1, 4, 100, 64}, {1, 2, 130, 64}, {1, 2, 130, 64}), attn(true, 64)}),
          // The tensor-core backward (bf16/f16 on CUDA): head dim 128 (query chunks of 32 in the
          // dK/dV kernel), and head dim 64 over several query heads of one KV head.
          large({"tiles: D 128, GQA 2, causal, 70 queries over 90 keys",
                 qkv({1, 4, 70, 128}, {1, 2, 90, 128}, {1, 2, 90, 128}), attn(true, 128)}),
          large({"tiles: D 64, multi-query, 4 heads, 140 queries and keys",
                 qkv({1, 4, 140, 64}, {1, 1, 140, 64}, {1, 1, 140, 64}), attn(false, 64)}),
          // The tensor-core backward's dbias (the (+) variants): summed over 2 batch rows and 4
          // heads of 2 KV heads, causal, several query and key tiles.
          large({"tiles: D 64, GQA 2, causal, 2 batch rows, 70 queries over 100 keys, bias",
                 with_bias({2, 4, 70, 64}, {2, 2, 100, 64}, {2, 2, 100, 64}, {70, 100}), attn(true, 64)}),
          // Decode steps: the split-KV kernel on CUDA (a few queries, 128+ keys, no bias).
          kernel_path({"decode: GQA 4, causal, 1 query over 300 keys, D 64",
                       qkv({2, 8, 1, 64}, {2, 2, 300, 64}, {2, 2, 300, 64}), attn(true, 64)}),
          kernel_path({"decode: multi-query, causal, 3 queries over 200 keys, D 128, Dv 32",
                       qkv({1, 4, 3, 128}, {1, 1, 200, 128}, {1, 1, 200, 32}), attn(true, 128)})};
}

}  // namespace

OpCase case_attention() {
  OpCase c;
  c.samples = attention_samples();
  c.reference = [](const std::vector<Ref>& in, const Attrs& attrs) {
    const auto& a = std::get<AttentionAttrs>(attrs);
    const Ref &q = in[0], &v = in[2];
    const int64_t B = q.shape[0], H = q.shape[1], T = q.shape[2], Hk = v.shape[1], S = v.shape[2], Dv = v.shape[3];
    Ref out({B, H, T, Dv}), lse({B, H, T});
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < T; ++i) {
          const std::vector<double> s = scores(in, a, b, h, i);
          const double z = logsumexp(s);
          lse.at({b, h, i}) = z;
          if (z == -INFINITY) continue;  // the row sees no key: its output is 0
          for (int64_t e = 0; e < Dv; ++e) {
            double o = 0;
            for (int64_t j = 0; j < S; ++j) o += std::exp(s[size_t(j)] - z) * v.at({b, h / (H / Hk), j, e});
            out.at({b, h, i, e}) = o;
          }
        }
    return std::vector<Ref>{out, lse};
  };
  return c;
}

// Inputs (grad_out, q, k, v, bias?, out, lse): the reference differentiates with the given out
// and lse, P_ij = exp(s_ij - lse_i) and delta_i = <dO_i, O_i>, by plain loops.
OpCase case_attention_backward() {
  OpCase c;
  int large_seen = 0;
  for (Sample s : attention_samples()) {
    if (s.label.starts_with("two key tiles")) continue;  // covered by the attention gradient check
    // With an arbitrary lse, exp(s - lse) is large, and float32 sums over long rows and dot
    // products drift toward the tolerance (CUDA against CPU): of the large samples only the first
    // (the smallest dims, still several tiles each way) runs here; the attention case's
    // gradients, with the real lse, cover the others. The small-head samples run too: the
    // attention case checks no float32 gradient.
    if (!s.numeric_grad && !s.label.starts_with("small head") && large_seen++ > 0) continue;
    const Shape q = s.inputs[0].shape, v = s.inputs[2].shape;
    const Shape out{q[0], q[1], q[2], v[3]}, lse{q[0], q[1], q[2]};
    s.inputs = {real(out), s.inputs[0], s.inputs[1], s.inputs[2], s.inputs[3], real(out), real(lse)};
    c.samples.push_back(s);
  }
  c.reference = [](const std::vector<Ref>& in, const Attrs& attrs) {
    const auto& a = std::get<AttentionAttrs>(attrs);
    const Ref &g = in[0], &q = in[1], &k = in[2], &v = in[3], &bias = in[4], &o = in[5], &lse = in[6];
    const int64_t B = q.shape[0], H = q.shape[1], T = q.shape[2], D = q.shape[3], Hk = k.shape[1], S = k.shape[2],
                  Dv = v.shape[3];
    Ref dq(q.shape), dk(k.shape), dv(v.shape), db(bias.v.empty() ? Shape{0} : bias.shape);
    const std::vector<Ref> fwd_in{q, k, v, bias};
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h) {
        const int64_t hk = h / (H / Hk);
        for (int64_t i = 0; i < T; ++i) {
          const std::vector<double> s = scores(fwd_in, a, b, h, i);
          double delta = 0;
          for (int64_t e = 0; e < Dv; ++e) delta += g.at({b, h, i, e}) * o.at({b, h, i, e});
          for (int64_t j = 0; j < S; ++j) {
            const double p = s[size_t(j)] == -INFINITY ? 0.0 : std::exp(s[size_t(j)] - lse.at({b, h, i}));
            double dp = 0;
            for (int64_t e = 0; e < Dv; ++e) {
              dv.at({b, hk, j, e}) += p * g.at({b, h, i, e});
              dp += g.at({b, h, i, e}) * v.at({b, hk, j, e});
            }
            const double ds = p * (dp - delta);
            for (int64_t d = 0; d < D; ++d) {
              dq.at({b, h, i, d}) += a.scale * ds * k.at({b, hk, j, d});
              dk.at({b, hk, j, d}) += a.scale * ds * q.at({b, h, i, d});
            }
            if (!bias.v.empty()) db.at({i, j}) += ds;
          }
        }
      }
    return std::vector<Ref>{dq, dk, dv, db};
  };
  c.gradcheck = false;
  c.f32_tolerance = 1e-4;  // lse inputs are arbitrary, so exp(s - lse) can be large
  // CUDA and CPU sum those large terms in different orders (tiles of keys and query rows): on an
  // H200 they differed by up to 1.2e-4 (dK of a causal GQA sample with a bias) while the float64
  // run agreed to 1e-9.
  c.cuda_f32_tolerance = 1e-3;
  return c;
}

// ---- K = V as one tensor, and q, k, v read in place from permuted views ------------------------

namespace {

struct AttentionRun {
  std::vector<double> out, dq, dkv, dv, dbias;  // dv: of a V with values of its own
};

// attention(q, kv, kv', bias) with q and kv leaves of shape [B, T, H, D] and [B, S, Hk, D] read
// through permuted [B, H, T, D] views (last dim contiguous, read in place); kv' is the same view
// handle (K = V as one tensor) or, with split, a contiguous copy (K and V apart, equal values),
// or, given v0, a leaf of its own with those values (read the same way). bias0 may be undefined
// (no bias: dbias empty). Loss sum(out * w).
AttentionRun run_kv(const Tensor& q0, const Tensor& kv0, const Tensor& bias0, const Tensor& w, Device dev, bool causal,
                    bool split, const Tensor& v0 = Tensor()) {
  Tensor q = q0.to(dev).detach(), kv = kv0.to(dev).detach();
  Tensor bias = bias0.defined() ? bias0.to(dev).detach() : Tensor(), v = v0.defined() ? v0.to(dev).detach() : Tensor();
  q.set_requires_grad();
  kv.set_requires_grad();
  if (bias.defined()) bias.set_requires_grad();
  if (v.defined()) v.set_requires_grad();
  const Tensor kh = kv.permute({0, 2, 1, 3});
  const Tensor vh = v.defined() ? v.permute({0, 2, 1, 3}) : split ? kh.contiguous() : kh;
  const Tensor out = attention(q.permute({0, 2, 1, 3}), kh, vh, bias, causal);
  sum(out * w.to(dev)).backward();
  return {out.to_vector<double>(), q.grad().to_vector<double>(), kv.grad().to_vector<double>(),
          v.defined() ? v.grad().to_vector<double>() : std::vector<double>{},
          bias.defined() ? bias.grad().to_vector<double>() : std::vector<double>{}};
}

// An empty string when |a - b| <= tol (1 + |b|) everywhere, else the first bad element.
std::string mismatch(const std::vector<double>& a, const std::vector<double>& b, double tol) {
  if (a.size() != b.size()) return cat("sizes ", a.size(), " vs ", b.size());
  for (size_t i = 0; i < a.size(); ++i)
    if (!(a[i] == b[i] || std::abs(a[i] - b[i]) <= tol * (1 + std::abs(b[i]))))
      return cat("element ", i, ": ", a[i], " vs ", b[i]);
  return "";
}

void expect_same_run(const AttentionRun& got, const AttentionRun& want, double tol, const std::string& what) {
  CHECK_MESSAGE(mismatch(got.out, want.out, tol) == "", what, " out: ", mismatch(got.out, want.out, tol));
  CHECK_MESSAGE(mismatch(got.dq, want.dq, tol) == "", what, " dq: ", mismatch(got.dq, want.dq, tol));
  CHECK_MESSAGE(mismatch(got.dkv, want.dkv, tol) == "", what, " dkv: ", mismatch(got.dkv, want.dkv, tol));
  CHECK_MESSAGE(mismatch(got.dbias, want.dbias, tol) == "", what, " dbias: ", mismatch(got.dbias, want.dbias, tol));
}

}  // namespace

TEST_CASE("attention: K = V as one tensor and permuted views, CUDA against CPU, the same bits run to run") {
  struct Config {
    int64_t B, T, S, H, Hk, D;
    bool causal;
  };
  // GQA 2 over several query and key tiles: causal with fewer queries than keys, and with more
  // (rows that see no key); D not a power of two.
  for (const Config c : {Config{2, 50, 70, 4, 2, 40, true}, Config{1, 70, 45, 3, 1, 24, true}}) {
    for (DType dt : {DType::f64, DType::f32}) {
      const std::string what = cat(dtype_name(dt), " T ", c.T, " S ", c.S);
      Generator gen(uint64_t(7 + c.T));
      const Tensor q = randn({c.B, c.T, c.H, c.D}, {dt, kCPU}, &gen);
      const Tensor kv = randn({c.B, c.S, c.Hk, c.D}, {dt, kCPU}, &gen);
      const Tensor bias = randn({c.T, c.S}, {dt, kCPU}, &gen);
      const Tensor w = randn({c.B, c.H, c.T, c.D}, {dt, kCPU}, &gen);
      const double tol = dt == DType::f64 ? 1e-9 : 1e-4;
      const AttentionRun cpu = run_kv(q, kv, bias, w, kCPU, c.causal, false);
      expect_same_run(run_kv(q, kv, bias, w, kCPU, c.causal, true), cpu, tol, what + " CPU, K and V apart");
      if (!cuda_available()) continue;
      const Device gpu("cuda:0");
      const AttentionRun first = run_kv(q, kv, bias, w, gpu, c.causal, false);
      expect_same_run(first, cpu, tol, what + " CUDA, K = V");
      expect_same_run(run_kv(q, kv, bias, w, gpu, c.causal, true), cpu, tol, what + " CUDA, K and V apart");
      const AttentionRun again = run_kv(q, kv, bias, w, gpu, c.causal, false);
      CHECK_MESSAGE((again.out == first.out && again.dq == first.dq && again.dkv == first.dkv &&
                     again.dbias == first.dbias),
                    what, " CUDA: a second run gave different bits");
    }
  }
}

}  // namespace qkv::test

namespace qkv::test {
namespace {

// ||a - b|| / ||b||; infinite when the sizes differ or a value is not finite.
double relative_error(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return INFINITY;
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    diff += (a[i] - b[i]) * (a[i] - b[i]);
    norm += b[i] * b[i];
  }
  return std::sqrt(diff / std::max(norm, 1e-300));
}

}  // namespace

// The tensor-core kernels (bf16 and f16 on CUDA) on the model's own layout: K = V as one tensor
// or K and V apart with values of their own, q, k, v as permuted views, head dims 64 and 128, query and key counts that
// are not multiples of the tiles, more key tiles than the Hopper pipeline's stages (a stage refilled), causal or not,
// GQA, MQA and the (+) variants' bias. Where the device runs the Hopper kernels (the emulated device is a 9.0), each
// configuration runs on them and again on the mma.sync kernels (QKV_ATTENTION_KERNELS=mma) that other devices run. The
// reference is the CPU in float64 on the same rounded inputs; outputs and gradients within 1% (bf16) or 0.3% (f16) in
// norm, and a second run gives the same bits. The small run (QKV_HARNESS_SMALL=1) keeps two configurations that between
// them reach every instantiation the dispatch chooses from.
TEST_CASE("attention: bf16 and f16 flash attention, K = V as one tensor, CUDA against the CPU in float64") {
  if (!cuda_available()) return;
  struct Config {
    int64_t B, T, S, H, Hk, D;
    bool causal, split, bias;  // split: K and V apart
    DType dtype;
  };
  const Device gpu("cuda:0");
  std::vector<Config> configs = {Config{2, 100, 130, 4, 2, 64, true, false, true, DType::bf16},
                                 Config{1, 130, 290, 2, 1, 128, false, true, false, DType::f16},
                                 Config{1, 70, 90, 4, 1, 128, true, false, true, DType::bf16},
                                 Config{2, 65, 65, 2, 2, 64, false, true, false, DType::f16},
                                 Config{2, 100, 130, 4, 2, 64, true, true, true, DType::f16},
                                 Config{1, 130, 70, 2, 1, 128, false, false, true, DType::bf16}};
  if (small_samples_only()) configs.resize(2);  // under a sanitizer or on the emulated device
  for (const char* kernels : {"", "mma"}) {
    if (*kernels) setenv("QKV_ATTENTION_KERNELS", kernels, 1);
    else unsetenv("QKV_ATTENTION_KERNELS");
    for (const Config c : configs) {
      const std::string what =
          cat(*kernels ? "mma.sync " : "", dtype_name(c.dtype), " D ", c.D, " T ", c.T, " S ", c.S,
              c.causal ? " causal" : "", c.split ? " K and V apart" : " K = V", c.bias ? " with a bias" : "");
      Generator gen(uint64_t(11 + c.T + c.D));
      auto draw = [&](Shape s) { return randn(s, {DType::f32, kCPU}, &gen).to(c.dtype); };
      const Tensor q = draw({c.B, c.T, c.H, c.D}), kv = draw({c.B, c.S, c.Hk, c.D});
      const Tensor v = c.split ? draw({c.B, c.S, c.Hk, c.D}) : Tensor();  // values of its own
      const Tensor bias = c.bias ? draw({c.T, c.S}) : Tensor(), w = draw({c.B, c.H, c.T, c.D});
      auto f64 = [](const Tensor& t) { return t.defined() ? t.to(DType::f64) : t; };
      const AttentionRun ref = run_kv(f64(q), f64(kv), f64(bias), f64(w), kCPU, c.causal, c.split, f64(v));
      const AttentionRun got = run_kv(q, kv, bias, w, gpu, c.causal, c.split, v);
      const double tol = c.dtype == DType::bf16 ? 1e-2 : 3e-3;
      for (const auto& [name, a, b] :
           {std::tuple{std::string("out"), &got.out, &ref.out}, std::tuple{std::string("dq"), &got.dq, &ref.dq},
            std::tuple{std::string("dkv"), &got.dkv, &ref.dkv},
            std::tuple{std::string("dbias"), &got.dbias, &ref.dbias}}) {
        const double err = relative_error(*a, *b);
        CHECK_MESSAGE(err <= tol, what, " ", name, ": relative error ", err, " (tolerance ", tol, ")");
      }
      const AttentionRun again = run_kv(q, kv, bias, w, gpu, c.causal, c.split, v);
      CHECK_MESSAGE((again.out == got.out && again.dq == got.dq && again.dkv == got.dkv && again.dv == got.dv &&
                     again.dbias == got.dbias),
                    what, ": a second run gave different bits");
    }
  }
  unsetenv("QKV_ATTENTION_KERNELS");
}

}  // namespace qkv::test
