// Test cases for the fused attention op and its backward: multi-head, grouped and multi-query
// heads, causal masks (including fewer queries than keys), a 2D score bias, and rows spanning
// more than one 64-key tile.
#include <cmath>

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

std::vector<Sample> attention_samples() {
  auto qkv = [](Shape q, Shape k, Shape v) { return std::vector<InputSpec>{real(q), real(k), real(v), absent()}; };
  auto with_bias = [](Shape q, Shape k, Shape v, Shape b) {
    return std::vector<InputSpec>{real(q), real(k), real(v), real(b)};
  };
  return {{"multi-head", qkv({2, 2, 5, 3}, {2, 2, 5, 3}, {2, 2, 5, 4}), attn(false, 3)},
          {"causal with bias", with_bias({1, 2, 6, 3}, {1, 2, 6, 3}, {1, 2, 6, 3}, {6, 6}), attn(true, 3)},
          {"grouped heads", qkv({1, 4, 5, 3}, {1, 2, 5, 3}, {1, 2, 5, 3}), attn(false, 3)},
          {"multi-query, causal, 3 queries over 7 keys", qkv({2, 3, 3, 4}, {2, 1, 7, 4}, {2, 1, 7, 2}), attn(true, 4)},
          {"two key tiles, causal", with_bias({1, 1, 70, 2}, {1, 1, 70, 2}, {1, 1, 70, 2}, {70, 70}), attn(true, 2)}};
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
  for (Sample s : attention_samples()) {
    if (s.label.starts_with("two key tiles")) continue;  // covered by the attention gradient check
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
  return c;
}

}  // namespace qkv::test
