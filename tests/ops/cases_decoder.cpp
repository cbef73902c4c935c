// Test cases for the ops of a Llama-style block: RMS norm (alone, its backward, and after
// dropout and a residual add), rotary position embedding and the SwiGLU gate. The rotary
// tables are arbitrary reals here: the op is a pairwise linear map of x whatever they hold.
#include <cmath>

#include "tensor/philox.h"
#include "tests/ops/references.h"

namespace qkv::test {

namespace {

// The RMS norm of x over its last dim times w (empty: 1): y, rstd.
std::vector<Ref> rms_norm_ref(const Ref& x, const Ref& w, double eps) {
  const int64_t n = x.shape.back(), rows = x.size() / n;
  Ref y(x.shape), rstd(Shape(x.shape.begin(), x.shape.end() - 1));
  for (int64_t r = 0; r < rows; ++r) {
    double ms = 0;
    for (int64_t j = 0; j < n; ++j) ms += x.v[size_t(r * n + j)] * x.v[size_t(r * n + j)];
    const double rs = 1 / std::sqrt(ms / double(n) + eps);
    rstd.v[size_t(r)] = rs;
    for (int64_t j = 0; j < n; ++j)
      y.v[size_t(r * n + j)] = x.v[size_t(r * n + j)] * rs * (w.v.empty() ? 1 : w.v[size_t(j)]);
  }
  return {y, rstd};
}

// Dropout as cases_nn.cpp's reference: element i kept (scaled by 1 / (1 - p)) when lane i % 4 of
// Philox block offset + i / 4 is at least p.
Ref dropout_of(const Ref& x, double p, uint64_t seed, uint64_t offset) {
  Ref y(x.shape);
  for (size_t i = 0; i < y.v.size(); ++i) {
    const uint32_t bits = philox::block(seed, offset + i / 4).v[i % 4];
    y.v[i] = double(bits) / 4294967296.0 >= p ? x.v[i] / (1 - p) : 0;
  }
  return y;
}

}  // namespace

OpCase case_rms_norm() {
  OpCase c;
  c.samples = {{"weight", {real({4, 6}), real({6})}, LayerNormAttrs{1e-6}},
               {"3-d, no weight", {real({2, 3, 5}), absent()}, LayerNormAttrs{1e-5}},
               kernel_path({"multi-warp rows: 5 x 1000", {real({5, 1000}), real({1000})}, LayerNormAttrs{1e-6}})};
  c.reference = [](const std::vector<Ref>& in, const Attrs& attrs) {
    return rms_norm_ref(in[0], in[1], std::get<LayerNormAttrs>(attrs).eps);
  };
  return c;
}

// Inputs (grad, x, weight?, rstd): d y_k / d x_j = w_k rs (delta_kj - xhat_k xhat_j / n), with
// the given rstd.
OpCase case_rms_norm_backward() {
  OpCase c;
  c.samples = {{"with weight", {real({3, 5}), real({3, 5}), real({5}), positive({3})}, LayerNormAttrs{}},
               {"no weight", {real({2, 2, 4}), real({2, 2, 4}), absent(), positive({2, 2})}, LayerNormAttrs{}},
               {"multi-warp rows: 6 x 700",
                {real({6, 700}), real({6, 700}), real({700}), positive({6})},
                LayerNormAttrs{},
                false}};
  c.reference = [](const std::vector<Ref>& in, const Attrs&) {
    const Ref &g = in[0], &x = in[1], &w = in[2], &rstd = in[3];
    const int64_t n = x.shape.back(), rows = x.size() / n;
    Ref dx(x.shape), dw(Shape{n});
    for (int64_t r = 0; r < rows; ++r) {
      const double rs = rstd.v[size_t(r)];
      for (int64_t j = 0; j < n; ++j) {
        const double xhat_j = x.v[size_t(r * n + j)] * rs;
        double acc = 0;
        for (int64_t k = 0; k < n; ++k) {
          const double xhat_k = x.v[size_t(r * n + k)] * rs, wk = w.v.empty() ? 1 : w.v[size_t(k)];
          acc += g.v[size_t(r * n + k)] * wk * rs * ((k == j ? 1.0 : 0.0) - xhat_k * xhat_j / double(n));
        }
        dx.v[size_t(r * n + j)] = acc;
        dw.v[size_t(j)] += g.v[size_t(r * n + j)] * xhat_j;
      }
    }
    return std::vector<Ref>{dx, dw};
  };
  c.gradcheck = false;
  return c;
}

// Outputs (rms_norm(sum), rstd, sum = x + dropout(y)).
OpCase case_dropout_add_rms_norm() {
  OpCase c;
  c.samples = {{"no dropout, weight", {real({4, 6}), real({4, 6}), real({6})}, DropoutAddNormAttrs{0, 0, 0, 1e-6}},
               {"p=0.3, 3-d", {real({2, 3, 8}), real({2, 3, 8}), real({8})}, DropoutAddNormAttrs{0.3, 42, 5, 1e-6}},
               {"p=0.5, no weight", {real({3, 8}), real({3, 8}), absent()}, DropoutAddNormAttrs{0.5, 7, 0, 1e-3}},
               {"p=0.1, wide rows",
                {real({3, 300}), real({3, 300}), real({300})},
                DropoutAddNormAttrs{0.1, 3, 11, 1e-5}}};
  c.reference = [](const std::vector<Ref>& in, const Attrs& attrs) {
    const auto& a = std::get<DropoutAddNormAttrs>(attrs);
    Ref sum = a.p > 0 ? dropout_of(in[1], a.p, a.seed, a.offset) : in[1];
    for (size_t i = 0; i < sum.v.size(); ++i) sum.v[i] += in[0].v[i];
    std::vector<Ref> out = rms_norm_ref(sum, in[2], a.eps);
    out.push_back(sum);
    return out;
  };
  return c;
}

// x [B, T, H, D] turned at positions start + t by cos, sin [P, R/2] (the inverse: by -sin).
Ref rope_ref(const Ref& x, const Ref& cos, const Ref& sin, int64_t start, bool inverse) {
  const int64_t half = cos.shape[1];
  Ref y = x;
  for_each_index(x.shape, [&](const std::vector<int64_t>& i) {
    const int64_t d = i[3];
    if (d >= 2 * half) return;
    const int64_t p = start + i[1], c = d % half;
    const double co = cos.at({p, c}), si = (inverse ? -1 : 1) * sin.at({p, c});
    const double partner = x.at({i[0], i[1], i[2], d < half ? d + half : d - half});
    y.at(i) = d < half ? x.at(i) * co - partner * si : x.at(i) * co + partner * si;
  });
  return y;
}

OpCase case_rope() {
  OpCase c;
  c.samples = {
      {"whole head, from 0", {real({2, 3, 2, 4}), constant(real({3, 2})), constant(real({3, 2})), absent()}},
      {"partial: 4 of 6 dims, at a drawn start",
       {real({1, 2, 3, 6}), constant(real({7, 2})), constant(real({7, 2})), index({}, 6)}},
      {"inverse", {real({1, 4, 1, 8}), constant(real({5, 4})), constant(real({5, 4})), index({}, 2)}, RopeAttrs{true}},
      kernel_path({"many rows: 2 x 40 tokens x 4 heads x 64",
                   {real({2, 40, 4, 64}), constant(real({50, 32})), constant(real({50, 32})), index({}, 11)}})};
  for (Sample& s : c.samples)
    if (std::holds_alternative<NoAttrs>(s.attrs)) s.attrs = RopeAttrs{};
  c.reference = [](const std::vector<Ref>& in, const Attrs& attrs) {
    const int64_t start = in[3].size() > 0 ? int64_t(in[3].v[0]) : 0;
    return std::vector<Ref>{rope_ref(in[0], in[1], in[2], start, std::get<RopeAttrs>(attrs).inverse)};
  };
  return c;
}

namespace {
double sigmoid(double a) { return 1 / (1 + std::exp(-a)); }
}  // namespace

OpCase case_swiglu() {
  OpCase c;
  c.samples = {{"[3, 2F] F 4", {real({3, 8})}},
               {"3-d", {real({2, 3, 6})}},
               kernel_path({"wide: 7 x 2 x 700", {real({7, 1400})}})};
  c.reference = [](const std::vector<Ref>& in, const Attrs&) {
    const Ref& h = in[0];
    const int64_t F = h.shape.back() / 2, rows = h.size() / (2 * F);
    Shape out_shape = h.shape;
    out_shape.back() = F;
    Ref y(out_shape);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < F; ++j) {
        const double a = h.v[size_t(r * 2 * F + j)], b = h.v[size_t(r * 2 * F + F + j)];
        y.v[size_t(r * F + j)] = a * sigmoid(a) * b;
      }
    return std::vector<Ref>{y};
  };
  return c;
}

OpCase case_swiglu_backward() {
  OpCase c;
  c.samples = {{"F 4", {real({3, 4}), real({3, 8})}},
               kernel_path({"wide: 5 x 700", {real({5, 700}), real({5, 1400})}})};
  c.reference = [](const std::vector<Ref>& in, const Attrs&) {
    const Ref &g = in[0], &h = in[1];
    const int64_t F = g.shape.back(), rows = g.size() / F;
    Ref dh(h.shape);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < F; ++j) {
        const double a = h.v[size_t(r * 2 * F + j)], b = h.v[size_t(r * 2 * F + F + j)], gj = g.v[size_t(r * F + j)];
        dh.v[size_t(r * 2 * F + j)] = gj * b * (sigmoid(a) + a * sigmoid(a) * (1 - sigmoid(a)));
        dh.v[size_t(r * 2 * F + F + j)] = gj * a * sigmoid(a);
      }
    return std::vector<Ref>{dh};
  };
  c.gradcheck = false;
  return c;
}

}  // namespace qkv::test
