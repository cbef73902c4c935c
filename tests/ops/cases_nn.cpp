// Test cases for matmul, softmax, layer norm (alone and after dropout and a residual add),
// embedding, cross-entropy and dropout.
#include "tensor/philox.h"
#include "tests/ops/references.h"

namespace qkv::test {

OpCase case_matmul() {
  OpCase c;
  c.samples = {{"2-d", {real({3, 4}), real({4, 5})}, MatmulAttrs{}},
               {"trans_a", {real({4, 3}), real({4, 2})}, MatmulAttrs{true, false}},
               {"trans_b", {real({3, 4}), real({5, 4})}, MatmulAttrs{false, true}},
               {"both transposed", {real({4, 3}), real({2, 4})}, MatmulAttrs{true, true}},
               {"batched", {real({2, 3, 4}), real({2, 4, 2})}, MatmulAttrs{}},
               {"broadcast batch", {real({2, 1, 3, 4}), real({3, 4, 2})}, MatmulAttrs{}},
               {"batches x one weight", {real({2, 3, 4}), real({4, 5})}, MatmulAttrs{}},
               {"batches x one weight^T", {real({2, 3, 4}), real({5, 4})}, MatmulAttrs{false, true}},
               {"matrix-vector", {real({3, 4}), real({4, 1})}, MatmulAttrs{}},
               {"row-vector", {real({1, 4}), real({4, 3})}, MatmulAttrs{}},
               // Sizes where cuBLASLt picks its tensor-core algorithms (bf16/f16), with odd
               // edges; and a leading dimension of 3 16-bit elements (6 bytes), which no
               // algorithm may take as it lies.
               {"tensor-core sizes: 200 x 264 by 264 x 136, b^T",
                {real({200, 264}), real({136, 264})},
                MatmulAttrs{false, true},
                false},
               {"odd inner dim 3", {real({64, 3}), real({3, 40})}, MatmulAttrs{}, false}};
  c.reference = [](const std::vector<Ref>& in, const Attrs& attrs) {
    const auto& f = std::get<MatmulAttrs>(attrs);
    const Ref &a = in[0], &b = in[1];
    auto mat = [](const Ref& x, bool t, const std::vector<int64_t>& batch_idx, int64_t i, int64_t j) {
      std::vector<int64_t> idx(static_cast<size_t>(x.dim()));
      const size_t lead = batch_idx.size() - size_t(x.dim() - 2);
      for (size_t d = 0; d + 2 < size_t(x.dim()); ++d) idx[d] = x.shape[d] == 1 ? 0 : batch_idx[lead + d];
      idx[size_t(x.dim() - 2)] = t ? j : i;
      idx[size_t(x.dim() - 1)] = t ? i : j;
      return x.at(idx);
    };
    const int64_t m = f.trans_a ? a.shape.back() : a.shape[size_t(a.dim() - 2)];
    const int64_t k = f.trans_a ? a.shape[size_t(a.dim() - 2)] : a.shape.back();
    const int64_t n = f.trans_b ? b.shape[size_t(b.dim() - 2)] : b.shape.back();
    Shape batch = broadcast(Shape(a.shape.begin(), a.shape.end() - 2), Shape(b.shape.begin(), b.shape.end() - 2));
    Shape out_shape = batch;
    out_shape.push_back(m);
    out_shape.push_back(n);
    Ref out(out_shape);
    for_each_index(out_shape, [&](const std::vector<int64_t>& o) {
      std::vector<int64_t> bi(o.begin(), o.end() - 2);
      double s = 0;
      for (int64_t p = 0; p < k; ++p)
        s += mat(a, f.trans_a, bi, o[o.size() - 2], p) * mat(b, f.trans_b, bi, p, o.back());
      out.at(o) = s;
    });
    return std::vector<Ref>{out};
  };
  return c;
}

namespace {
OpCase softmax_case(bool log_form) {
  OpCase c;
  c.samples = {{"last dim", {real({3, 7})}, DimAttrs{1}},
               {"first dim", {real({4, 3})}, DimAttrs{0}},
               {"middle dim", {real({2, 5, 3})}, DimAttrs{1}},
               {"single element", {real({3, 1})}, DimAttrs{1}},
               // The CUDA row kernels' block-wide reductions: several warps, several elements
               // per thread.
               kernel_path({"multi-warp rows: 3 x 300", {real({3, 300})}, DimAttrs{1}}),
               {"long rows: 2 x 3000", {real({2, 3000})}, DimAttrs{1}, false}};
  c.reference = [log_form](const std::vector<Ref>& in, const Attrs& attrs) {
    const int64_t dim = std::get<DimAttrs>(attrs).dim;
    const Ref& x = in[0];
    Ref y(x.shape);
    for_each_index(x.shape, [&](const std::vector<int64_t>& i) {
      double denom = 0;
      for (int64_t j = 0; j < x.shape[size_t(dim)]; ++j) denom += std::exp(x.at(with_coord(i, dim, j)));
      y.at(i) = log_form ? x.at(i) - std::log(denom) : std::exp(x.at(i)) / denom;
    });
    return std::vector<Ref>{y};
  };
  return c;
}

// Rows of the last dim: mean, 1/std, and the normalized row.
struct RowStats {
  double mean, rstd;
};
RowStats row_stats(const Ref& x, const std::vector<int64_t>& i, double eps) {
  const int64_t n = x.shape.back();
  double mu = 0, var = 0;
  for (int64_t j = 0; j < n; ++j) mu += x.at(with_coord(i, x.dim() - 1, j));
  mu /= double(n);
  for (int64_t j = 0; j < n; ++j) var += std::pow(x.at(with_coord(i, x.dim() - 1, j)) - mu, 2);
  return {mu, 1 / std::sqrt(var / double(n) + eps)};
}

// The layer norm of x over its last dim with weight w and bias b (empty: 1 and 0): y, mean, rstd.
std::vector<Ref> layer_norm_ref(const Ref& x, const Ref& w, const Ref& b, double eps) {
  Ref y(x.shape);
  Shape rows(x.shape.begin(), x.shape.end() - 1);
  Ref mean(rows), rstd(rows);
  for_each_index(x.shape, [&](const std::vector<int64_t>& i) {
    RowStats s = row_stats(x, i, eps);
    const int64_t j = i.back();
    const double wj = w.v.empty() ? 1 : w.v[size_t(j)], bj = b.v.empty() ? 0 : b.v[size_t(j)];
    y.at(i) = (x.at(i) - s.mean) * s.rstd * wj + bj;
    std::vector<int64_t> r(i.begin(), i.end() - 1);
    mean.at(r) = s.mean;
    rstd.at(r) = s.rstd;
  });
  return {y, mean, rstd};
}

// Dropout of x with Philox stream (seed, offset): element i keeps its value / (1 - p) when
// lane i % 4 of block offset + i / 4 is at least p (as a fraction of 2^32).
Ref dropout_ref(const Ref& x, double p, uint64_t seed, uint64_t offset) {
  Ref y(x.shape);
  for (size_t i = 0; i < y.v.size(); ++i) {
    const uint32_t bits = philox::block(seed, offset + i / 4).v[i % 4];
    const bool keep = double(bits) / 4294967296.0 >= p;
    y.v[i] = keep ? x.v[i] / (1 - p) : 0;
  }
  return y;
}
}  // namespace

OpCase case_softmax() { return softmax_case(false); }
OpCase case_log_softmax() { return softmax_case(true); }

OpCase case_layer_norm() {
  OpCase c;
  c.samples = {{"affine", {real({4, 6}), real({6}), real({6})}, LayerNormAttrs{1e-5}},
               {"3-d affine", {real({2, 3, 5}), real({5}), real({5})}, LayerNormAttrs{1e-5}},
               {"no affine", {real({3, 8}), absent(), absent()}, LayerNormAttrs{1e-3}},
               {"weight only", {real({3, 4}), real({4}), absent()}, LayerNormAttrs{1e-5}},
               kernel_path(
                   {"multi-warp rows: 5 x 1000", {real({5, 1000}), real({1000}), real({1000})}, LayerNormAttrs{1e-5}})};
  c.reference = [](const std::vector<Ref>& in, const Attrs& attrs) {
    return layer_norm_ref(in[0], in[1], in[2], std::get<LayerNormAttrs>(attrs).eps);
  };
  return c;
}

// Outputs (layer_norm(sum), mean, rstd, sum = x + dropout(y)): the gradient check goes through
// output 0, the layer norm, into both x and y.
OpCase case_dropout_add_layer_norm() {
  OpCase c;
  c.samples = {{"no dropout, affine", {real({4, 6}), real({4, 6}), real({6}), real({6})}, DropoutAddNormAttrs{}},
               {"p=0.3, 3-d affine",
                {real({2, 3, 8}), real({2, 3, 8}), real({8}), real({8})},
                DropoutAddNormAttrs{0.3, 42, 5, 1e-5}},
               {"p=0.5, no affine",
                {real({3, 8}), real({3, 8}), absent(), absent()},
                DropoutAddNormAttrs{0.5, 7, 0, 1e-3}},
               // Rows long enough for the CUDA kernel's multi-warp reduction.
               {"p=0.1, wide rows",
                {real({3, 300}), real({3, 300}), real({300}), real({300})},
                DropoutAddNormAttrs{0.1, 3, 11, 1e-5}}};
  c.reference = [](const std::vector<Ref>& in, const Attrs& attrs) {
    const auto& a = std::get<DropoutAddNormAttrs>(attrs);
    Ref sum = a.p > 0 ? dropout_ref(in[1], a.p, a.seed, a.offset) : in[1];
    for (size_t i = 0; i < sum.v.size(); ++i) sum.v[i] += in[0].v[i];
    std::vector<Ref> out = layer_norm_ref(sum, in[2], in[3], a.eps);
    out.push_back(sum);
    return out;
  };
  return c;
}

// Inputs (grad, x, weight?, mean, rstd): the reference recomputes the statistics from x and
// differentiates y = xhat * w by the chain rule, summing over the row.
OpCase case_layer_norm_backward() {
  OpCase c;
  c.samples = {{"with weight", {real({3, 5}), real({3, 5}), real({5}), real({3}), positive({3})}, LayerNormAttrs{}},
               {"no weight",
                {real({2, 2, 4}), real({2, 2, 4}), absent(), real({2, 2}), positive({2, 2})},
                LayerNormAttrs{}},
               {"multi-warp rows: 6 x 700",
                {real({6, 700}), real({6, 700}), real({700}), real({6}), positive({6})},
                LayerNormAttrs{},
                false}};
  c.reference = [](const std::vector<Ref>& in, const Attrs&) {
    const Ref &g = in[0], &x = in[1], &w = in[2], &mean = in[3], &rstd = in[4];
    const int64_t n = x.shape.back();
    Ref dx(x.shape), dw(Shape{n}), db(Shape{n});
    for_each_index(x.shape, [&](const std::vector<int64_t>& i) {
      std::vector<int64_t> r(i.begin(), i.end() - 1);
      const double mu = mean.at(r), rs = rstd.at(r);
      const int64_t j = i.back();
      // d y_k / d x_j = w_k rs (delta_kj - 1/n - xhat_k xhat_j / n), with the given mean/rstd.
      double acc = 0;
      const double xhat_j = (x.at(i) - mu) * rs;
      for (int64_t k = 0; k < n; ++k) {
        auto ik = with_coord(i, x.dim() - 1, k);
        const double xhat_k = (x.at(ik) - mu) * rs, wk = w.v.empty() ? 1 : w.v[size_t(k)];
        acc += g.at(ik) * wk * rs * ((k == j ? 1.0 : 0.0) - 1.0 / double(n) - xhat_k * xhat_j / double(n));
      }
      dx.at(i) = acc;
      dw.v[size_t(j)] += g.at(i) * xhat_j;
      db.v[size_t(j)] += g.at(i);
    });
    return std::vector<Ref>{dx, dw, db};
  };
  c.gradcheck = false;
  return c;
}

OpCase case_embedding() {
  OpCase c;
  c.samples = {{"ids [5]", {real({7, 3}), index({5}, 7)}},
               {"ids [2, 4]", {real({10, 4}), index({2, 4}, 10)}},
               {"int32 ids", {real({6, 2}), index32({3, 3}, 6)}}};
  c.reference = [](const std::vector<Ref>& in, const Attrs&) {
    const Ref &w = in[0], &ids = in[1];
    Shape s = ids.shape;
    s.push_back(w.shape[1]);
    Ref out(s);
    for_each_index(s, [&](const std::vector<int64_t>& i) {
      std::vector<int64_t> id(i.begin(), i.end() - 1);
      out.at(i) = w.at({int64_t(ids.at(id)), i.back()});
    });
    return std::vector<Ref>{out};
  };
  return c;
}

namespace {
// Per-row loss and log-sum-exp; rows whose target is ignore_index contribute 0.
void ce_rows(const Ref& x, const Ref& t, int64_t ignore, Ref& loss, Ref& lse, int64_t& valid) {
  const int64_t C = x.shape.back();
  valid = 0;
  for (int64_t r = 0; r < t.size(); ++r) {
    double s = 0;
    for (int64_t k = 0; k < C; ++k) s += std::exp(x.v[size_t(r * C + k)]);
    lse.v[size_t(r)] = std::log(s);
    const int64_t tr = int64_t(t.v[size_t(r)]);
    loss.v[size_t(r)] = tr == ignore ? 0 : lse.v[size_t(r)] - x.v[size_t(r * C + tr)];
    valid += tr != ignore;
  }
}
}  // namespace

OpCase case_cross_entropy() {
  OpCase c;
  c.samples = {{"mean", {real({5, 4}), index({5}, 4)}, CrossEntropyAttrs{-100, Reduction::mean}},
               {"sum", {real({3, 6}), index({3}, 6)}, CrossEntropyAttrs{-100, Reduction::sum}},
               {"none, 3-d", {real({2, 3, 5}), index({2, 3}, 5)}, CrossEntropyAttrs{-100, Reduction::none}},
               {"ignore index 0", {real({6, 3}), index({6}, 3)}, CrossEntropyAttrs{0, Reduction::mean}},
               {"int32 targets", {real({4, 3}), index32({4}, 3)}, CrossEntropyAttrs{-100, Reduction::mean}},
               kernel_path({"vocabulary rows: 4 x 5000",
                            {real({4, 5000}), index({4}, 5000)},
                            CrossEntropyAttrs{-100, Reduction::mean}})};
  c.reference = [](const std::vector<Ref>& in, const Attrs& attrs) {
    const auto& a = std::get<CrossEntropyAttrs>(attrs);
    Ref loss(in[1].shape), lse(in[1].shape);
    int64_t valid = 0;
    ce_rows(in[0], in[1], a.ignore_index, loss, lse, valid);
    if (a.reduction == Reduction::none) return std::vector<Ref>{loss, lse};
    double total = 0;
    for (double v : loss.v) total += v;
    Ref out(Shape{}, a.reduction == Reduction::mean ? total / double(valid) : total);
    return std::vector<Ref>{out, lse};
  };
  return c;
}

// Inputs (grad, logits, target, lse).
OpCase case_cross_entropy_backward() {
  OpCase c;
  c.samples = {{"mean", {real({}), real({4, 3}), index({4}, 3), real({4})}, CrossEntropyAttrs{-100, Reduction::mean}},
               {"none with ignore",
                {real({5}), real({5, 4}), index({5}, 4), real({5})},
                CrossEntropyAttrs{1, Reduction::none}},
               kernel_path({"vocabulary rows: 4 x 5000",
                            {real({}), real({4, 5000}), index({4}, 5000), real({4})},
                            CrossEntropyAttrs{-100, Reduction::mean}})};
  c.reference = [](const std::vector<Ref>& in, const Attrs& attrs) {
    const auto& a = std::get<CrossEntropyAttrs>(attrs);
    const Ref &g = in[0], &x = in[1], &t = in[2], &lse = in[3];
    const int64_t C = x.shape.back();
    int64_t valid = 0;
    for (double v : t.v) valid += int64_t(v) != a.ignore_index;
    Ref dx(x.shape);
    for (int64_t r = 0; r < t.size(); ++r) {
      const int64_t tr = int64_t(t.v[size_t(r)]);
      if (tr == a.ignore_index) continue;
      double scale = a.reduction == Reduction::none ? g.v[size_t(r)] : g.v[0];
      if (a.reduction == Reduction::mean) scale /= double(valid);
      for (int64_t k = 0; k < C; ++k)
        dx.v[size_t(r * C + k)] = scale * (std::exp(x.v[size_t(r * C + k)] - lse.v[size_t(r)]) - (k == tr ? 1 : 0));
    }
    return std::vector<Ref>{dx};
  };
  c.gradcheck = false;
  return c;
}

OpCase case_dropout() {
  OpCase c;
  c.samples = {{"p=0.5", {real({6, 7})}, DropoutAttrs{0.5, 42, 3}},
               {"p=0.1 3-d", {real({2, 3, 5})}, DropoutAttrs{0.1, 7, 0}},
               {"p=1", {real({4})}, DropoutAttrs{1.0, 1, 0}}};
  c.reference = [](const std::vector<Ref>& in, const Attrs& attrs) {
    const auto& d = std::get<DropoutAttrs>(attrs);
    return std::vector<Ref>{dropout_ref(in[0], d.p, d.seed, d.offset)};
  };
  return c;
}

// dropout(relu(x)): relu's kink kept away from the samples for the gradient check.
OpCase case_relu_dropout() {
  OpCase c;
  c.samples = {{"p=0.5", {away0({6, 7})}, DropoutAttrs{0.5, 42, 3}},
               {"p=0.1 3-d", {away0({2, 3, 5})}, DropoutAttrs{0.1, 7, 0}},
               {"p=0.2 contiguous", {away0({1027, 37})}, DropoutAttrs{0.2, 9, 5}, false},
               {"p=1", {away0({4})}, DropoutAttrs{1.0, 1, 0}}};
  c.reference = [](const std::vector<Ref>& in, const Attrs& attrs) {
    const auto& d = std::get<DropoutAttrs>(attrs);
    return std::vector<Ref>{dropout_ref(map1(in[0], [](double x) { return x > 0 ? x : 0.0; }), d.p, d.seed, d.offset)};
  };
  return c;
}

}  // namespace qkv::test
