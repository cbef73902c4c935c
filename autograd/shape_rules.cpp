#include "autograd/shape_rules.h"

#include <algorithm>
#include <array>

#include "autograd/shape_checks.h"

namespace qkv::autograd {

std::string describe(const Tensor& t) {
  if (!t.defined()) return "undefined";
  return cat(dtype_name(t.dtype()), " ", shape_str(t.shape()));
}

namespace shape {

using Specs = std::vector<OutputSpec>;

Specs broadcast(std::span<const Tensor> in, const Attrs&, const char* op) {
  same_dtype(in[0], in[1], op);
  return {{broadcast_shapes(in[0].shape(), in[1].shape(), op), in[0].dtype()}};
}

Specs compare(std::span<const Tensor> in, const Attrs&, const char* op) {
  same_dtype(in[0], in[1], op);
  return {{broadcast_shapes(in[0].shape(), in[1].shape(), op), DType::b8}};
}

Specs same(std::span<const Tensor> in, const Attrs&, const char*) { return {{in[0].shape(), in[0].dtype()}}; }

Specs same_pair(std::span<const Tensor> in, const Attrs&, const char* op) {
  same_dtype(in[0], in[1], op);
  check<ShapeError>(in[0].shape() == in[1].shape(), op, ": shapes must match: ", describe(in[0]), " vs ",
                    describe(in[1]));
  return {{in[0].shape(), in[0].dtype()}};
}

Specs reduce(std::span<const Tensor> in, const Attrs& attrs, const char* op) {
  const auto& a = attr<ReduceAttrs>(attrs, op);
  const Shape& s = in[0].shape();
  Shape out;
  for (int64_t d = 0; d < int64_t(s.size()); ++d) {
    bool reduced = std::find(a.dims.begin(), a.dims.end(), d) != a.dims.end();
    if (!reduced) out.push_back(s[d]);
    else if (a.keepdim) out.push_back(1);
  }
  return {{out, in[0].dtype()}};
}

Specs reduce_dim(std::span<const Tensor> in, const Attrs& attrs, const char* op) {
  const auto& a = attr<DimAttrs>(attrs, op);
  Shape out = in[0].shape();
  if (!out.empty()) {
    if (a.keepdim) out[a.dim] = 1;
    else out.erase(out.begin() + a.dim);
  }
  return {{out, in[0].dtype()}, {out, DType::i64}};
}

Specs matmul(std::span<const Tensor> in, const Attrs& attrs, const char* op) {
  const auto& a = attr<MatmulAttrs>(attrs, op);
  const Tensor &x = in[0], &y = in[1];
  same_dtype(x, y, op);
  check<ShapeError>(x.dim() >= 2 && y.dim() >= 2, op, ": expected inputs with at least 2 dims, got ", describe(x),
                    " and ", describe(y));
  const int64_t m = a.trans_a ? x.size(-1) : x.size(-2), k1 = a.trans_a ? x.size(-2) : x.size(-1);
  const int64_t k2 = a.trans_b ? y.size(-1) : y.size(-2), n = a.trans_b ? y.size(-2) : y.size(-1);
  check<ShapeError>(k1 == k2, op, ": inner dimensions differ: ", describe(x), (a.trans_a ? "^T" : ""), " @ ",
                    describe(y), (a.trans_b ? "^T" : ""), " (", k1, " vs ", k2, ")");
  Shape batch = broadcast_shapes(Shape(x.shape().begin(), x.shape().end() - 2),
                                 Shape(y.shape().begin(), y.shape().end() - 2), op);
  batch.push_back(m);
  batch.push_back(n);
  return {{batch, x.dtype()}};
}

// c += op(a) op(b) in place, all three 2-D: c has the product's shape and dtype.
Specs matmul_accumulate(std::span<const Tensor> in, const Attrs& attrs, const char* op) {
  const Tensor &c = in[0], &a = in[1], &b = in[2];
  check<ShapeError>(a.dim() == 2 && b.dim() == 2, op, ": expected 2-D a and b, got ", describe(a), " and ",
                    describe(b));
  const Specs product = matmul(in.subspan(1), attrs, op);
  same_dtype(c, a, op);
  check<ShapeError>(c.shape() == product[0].shape, op, ": c ", describe(c), " does not have the product's shape ",
                    shape_str(product[0].shape));
  return {};
}

Specs linear(std::span<const Tensor> in, const Attrs&, const char* op) {
  const Tensor &x = in[0], &w = in[1], &b = in[2];
  same_dtype(x, w, op);
  check<ShapeError>(x.dim() >= 2 && w.dim() == 2 && x.size(-1) == w.size(1), op,
                    ": expected x [..., K] (at least 2-D) and weight [M, K], got ", describe(x), " and ", describe(w));
  if (b.defined()) {
    same_dtype(x, b, op);
    check<ShapeError>(b.shape() == Shape{w.size(0)}, op, ": bias must have shape [", w.size(0),
                      "] (the weight's rows), got ", describe(b));
  }
  Shape out = x.shape();
  out.back() = w.size(0);
  return {{out, x.dtype()}};
}

Specs linear_weight_grad(std::span<const Tensor> in, const Attrs&, const char* op) {
  const Tensor &g = in[0], &x = in[1];
  same_dtype(g, x, op);
  check<ShapeError>(g.dim() == 2 && x.dim() == 2 && g.size(0) == x.size(0), op,
                    ": expected grad [N, M] and x [N, K], got ", describe(g), " and ", describe(x));
  return {{{g.size(1), x.size(1)}, x.dtype()}, {{g.size(1)}, x.dtype()}};
}

Specs layer_norm(std::span<const Tensor> in, const Attrs&, const char* op) {
  const Tensor& x = in[0];
  check<ShapeError>(x.dim() >= 1, op, ": expected at least 1 dim, got ", describe(x));
  const int64_t n = x.size(-1);
  for (int i : {1, 2}) {
    if (!in[i].defined()) continue;
    same_dtype(x, in[i], op);
    check<ShapeError>(in[i].shape() == Shape{n}, op, ": ", i == 1 ? "weight" : "bias", " must have shape [", n,
                      "] to match the last dim of ", describe(x), ", got ", describe(in[i]));
  }
  Shape rows(x.shape().begin(), x.shape().end() - 1);
  return {{x.shape(), x.dtype()}, {rows, x.dtype()}, {rows, x.dtype()}};
}

Specs dropout_add_layer_norm(std::span<const Tensor> in, const Attrs& attrs, const char* op) {
  const Tensor &x = in[0], &y = in[1];
  same_dtype(x, y, op);
  check<ShapeError>(x.shape() == y.shape(), op, ": the residual ", describe(x), " and the branch ", describe(y),
                    " must have one shape");
  Specs s = layer_norm(std::array<Tensor, 3>{x, in[2], in[3]}, attrs, op);  // normed, mean, rstd
  s.push_back(s[0]);                                                        // sum: as normed
  return s;
}

Specs layer_norm_backward(std::span<const Tensor> in, const Attrs&, const char* op) {
  const Tensor &g = in[0], &x = in[1];
  same_dtype(g, x, op);
  check<ShapeError>(g.shape() == x.shape(), op, ": grad ", describe(g), " does not match input ", describe(x));
  const int64_t n = x.size(-1);
  return {{x.shape(), x.dtype()}, {{n}, x.dtype()}, {{n}, x.dtype()}};
}

Specs embedding(std::span<const Tensor> in, const Attrs&, const char* op) {
  const Tensor &w = in[0], &ids = in[1];
  check<ShapeError>(w.dim() == 2, op, ": weight must be [num_embeddings, dim], got ", describe(w));
  index_dtype(ids, op, "ids");
  Shape out = ids.shape();
  out.push_back(w.size(1));
  return {{out, w.dtype()}};
}

Specs cross_entropy(std::span<const Tensor> in, const Attrs& attrs, const char* op) {
  const auto& a = attr<CrossEntropyAttrs>(attrs, op);
  const Tensor &x = in[0], &t = in[1];
  index_dtype(t, op, "target");
  check<ShapeError>(x.dim() >= 1 && Shape(x.shape().begin(), x.shape().end() - 1) == t.shape(), op, ": logits ",
                    describe(x), " need targets of shape ",
                    shape_str(x.dim() ? Shape(x.shape().begin(), x.shape().end() - 1) : Shape{}), ", got ",
                    describe(t));
  check<ShapeError>(x.size(-1) > 0, op, ": logits have no classes: ", describe(x));
  Shape loss = a.reduction == Reduction::none ? t.shape() : Shape{};
  // bf16/f16 logits (read in place by the CUDA kernel): the loss and lse are float32.
  const DType out = x.dtype() == DType::f64 ? DType::f64 : DType::f32;
  return {{loss, out}, {t.shape(), out}};
}

Specs cross_entropy_backward(std::span<const Tensor> in, const Attrs&, const char*) {
  return {{in[1].shape(), in[1].dtype()}};
}

namespace {
// The memory order of an attention output or gradient that follows its [B, H, T, D] operand x:
// heads stored within tokens ([B, T, H, D], the permuted projection) when x is, so that merging
// the heads back into [B, T, H * D] is a view; else row-major. The CUDA kernels write row-major
// heads.
Shape heads_order(const Tensor& x) {
  const bool token_major = x.device().is_cpu() && x.dim() == 4 && x.stride(3) == 1 && x.stride(1) < x.stride(2);
  return token_major ? Shape{0, 2, 1, 3} : Shape{};
}

// q [B, H, T, D], k [B, Hk, S, D], v [B, Hk, S, Dv], bias [T, S]; H a multiple of Hk. Shapes only.
Specs attention_shapes(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& bias, const char* op) {
  check<ShapeError>(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, op,
                    ": expected q, k, v of shape [batch, heads, len, dim], got ", describe(q), ", ", describe(k), ", ",
                    describe(v));
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), D = q.size(3), Hk = k.size(1), S = k.size(2);
  check<ShapeError>(k.size(0) == B && v.size(0) == B, op, ": batch sizes differ: q ", describe(q), ", k ", describe(k),
                    ", v ", describe(v));
  check<ShapeError>(k.size(3) == D, op, ": q and k head dims differ: ", describe(q), " vs ", describe(k));
  check<ShapeError>(v.size(1) == Hk && v.size(2) == S, op, ": k ", describe(k), " and v ", describe(v),
                    " must have the same heads and length");
  check<ShapeError>(Hk > 0 && H % Hk == 0, op, ": ", H, " query heads cannot be grouped over ", Hk, " key/value heads");
  if (bias.defined()) {
    same_dtype(q, bias, op);
    check<ShapeError>(bias.shape() == Shape{T, S}, op, ": bias must have shape [", T, ", ", S, "], got ",
                      describe(bias));
  }
  // The log-sum-exp the backward re-derives probabilities from stays float32 for 16-bit inputs:
  // rounded to bf16 it would be off by up to 0.03 at 8, and every probability by 3%.
  const DType lse = q.dtype() == DType::f64 ? DType::f64 : DType::f32;
  return {{{B, H, T, v.size(3)}, q.dtype(), heads_order(q)}, {{B, H, T}, lse}};
}
}  // namespace

Specs attention(std::span<const Tensor> in, const Attrs&, const char* op) {
  for (const Tensor* t : {&in[1], &in[2]}) same_dtype(in[0], *t, op);
  return attention_shapes(in[0], in[1], in[2], in[3], op);
}

namespace {
// An int8 cache tensor's scales: float32 [B, Hk, C, 1], one per row.
void row_scales(const Tensor& t, const Tensor& scales, const char* op, const char* what) {
  check<ValueError>(scales.defined(), op, ": an int8 ", what, " needs its float32 row scales");
  check<DTypeError>(scales.dtype() == DType::f32, op, ": ", what, " scales must be float32, got ", describe(scales));
  Shape want = t.shape();
  want.back() = 1;
  check<ShapeError>(scales.shape() == want, op, ": ", what, " ", describe(t), " needs scales of shape ",
                    shape_str(want), ", got ", describe(scales));
}
}  // namespace

// Inputs (q, k, v [B, Hk, C, Dv] the whole cache, start, k_scale?, v_scale?) -> (out, lse) as
// attention's. k and v are q's dtype, or both int8 with their row scales.
Specs cache_attention(std::span<const Tensor> in, const Attrs& attrs, const char* op) {
  position_scalar(in[3], op, "start");
  const Tensor &q = in[0], &k = in[1], &v = in[2];
  check<ValueError>(in[6].defined() == in[7].defined(), op, ": the rotary tables come as a pair, cos and sin");
  if (in[6].defined()) {
    rope_tables(in[6], in[7], k.dim() == 4 ? k.size(3) : 0, op);
    check<ShapeError>(k.dim() == 4 && in[6].size(0) >= k.size(2), op, ": the rotary tables hold ", in[6].size(0),
                      " positions, fewer than the cache's ", describe(k));
  }
  if (k.dtype() != DType::i8 && v.dtype() != DType::i8) {
    check<ValueError>(!in[4].defined() && !in[5].defined(), op, ": scales are for int8 keys and values only, got ",
                      describe(k));
    const Tensor qkv[] = {q, k, v, Tensor()};
    return attention(qkv, attrs, op);
  }
  check<DTypeError>(k.dtype() == DType::i8 && v.dtype() == DType::i8, op,
                    ": keys and values are both int8 or neither, got ", describe(k), " and ", describe(v));
  row_scales(k, in[4], op, "keys");
  row_scales(v, in[5], op, "values");
  return attention_shapes(q, k, v, Tensor(), op);
}

// Inputs (x [..., D]) -> (q int8 [..., D], scale float32 [..., 1]).
Specs quantize_int8(std::span<const Tensor> in, const Attrs&, const char* op) {
  const Tensor& x = in[0];
  check<ShapeError>(x.dim() >= 1, op, ": expected rows [..., D], got ", describe(x));
  Shape scale = x.shape();
  scale.back() = 1;
  return {{x.shape(), DType::i8}, {scale, DType::f32}};
}

// Inputs (cache [B, Hk, C, D], src [B, Hk, T, D], start): no outputs; cache rows written.
Specs kv_write(std::span<const Tensor> in, const Attrs&, const char* op) {
  const Tensor &cache = in[0], &src = in[1];
  same_dtype(cache, src, op);
  position_scalar(in[2], op, "start");
  check<ShapeError>(cache.dim() == 4 && src.dim() == 4 && cache.size(0) == src.size(0) &&
                        cache.size(1) == src.size(1) && cache.size(3) == src.size(3) && src.size(2) <= cache.size(2),
                    op,
                    ": expected src [batch, heads, T, dim] of at most the cache's rows and its other dims, got cache ",
                    describe(cache), " and src ", describe(src));
  return {};
}

// Inputs (grad_out, q, k, v, bias?, out, lse) -> (dq, dk, dv, dbias; dbias is [0] without a bias).
Specs attention_backward(std::span<const Tensor> in, const Attrs&, const char* op) {
  check<ShapeError>(in[0].shape() == in[5].shape(), op, ": grad ", describe(in[0]), " does not match the output ",
                    describe(in[5]));
  const Shape dbias = in[4].defined() ? in[4].shape() : Shape{0};
  return {{in[1].shape(), in[1].dtype(), heads_order(in[1])},
          {in[2].shape(), in[2].dtype(), heads_order(in[2])},
          {in[3].shape(), in[3].dtype(), heads_order(in[3])},
          {dbias, in[1].dtype()}};
}

namespace {

std::string pair_str(const std::array<int64_t, 2>& p) { return cat("(", p[0], ", ", p[1], ")"); }

void check_image(const Tensor& x, const char* op) {
  check<ShapeError>(x.dim() == 4, op, ": expected input [N, C, H, W], got ", describe(x));
}

void check_window_attrs(const std::array<int64_t, 2>& stride, const std::array<int64_t, 2>& padding, const char* op) {
  check<ValueError>(stride[0] >= 1 && stride[1] >= 1, op, ": stride must be positive, got ", pair_str(stride));
  check<ValueError>(padding[0] >= 0 && padding[1] >= 0, op, ": padding must be non-negative, got ", pair_str(padding));
}

// [Ho, Wo] of a kernel sliding over x's padded H x W plane (floor mode).
std::array<int64_t, 2> window_output(const Tensor& x, const std::array<int64_t, 2>& kernel,
                                     const std::array<int64_t, 2>& stride, const std::array<int64_t, 2>& padding,
                                     const char* op) {
  std::array<int64_t, 2> out{};
  for (size_t d = 0; d < 2; ++d) {
    const int64_t padded = x.size(int64_t(d) + 2) + 2 * padding[d];
    check<ShapeError>(padded >= kernel[d], op, ": kernel ", kernel[0], "x", kernel[1],
                      " is larger than the padded input ", x.size(2) + 2 * padding[0], "x", x.size(3) + 2 * padding[1],
                      " (input ", describe(x), ", padding ", pair_str(padding), ")");
    out[d] = (padded - kernel[d]) / stride[d] + 1;
  }
  return out;
}

// A per-channel vector ([C]) that must match x's dim 1, or be undefined.
void check_channel_vector(const Tensor& x, const Tensor& v, const char* what, const char* op) {
  if (!v.defined()) return;
  same_dtype(x, v, op);
  check<ShapeError>(v.shape() == Shape{x.size(1)}, op, ": ", what, " must have shape [", x.size(1),
                    "] (the channels of input ", describe(x), "), got ", describe(v));
}

}  // namespace

// x [N, C, H, W], weight [O, C, kh, kw], bias [O] or undefined -> [N, O, Ho, Wo].
Specs conv2d(std::span<const Tensor> in, const Attrs& attrs, const char* op) {
  const auto& a = attr<Conv2dAttrs>(attrs, op);
  const Tensor &x = in[0], &w = in[1];
  check_window_attrs(a.stride, a.padding, op);
  check_image(x, op);
  check<ShapeError>(w.dim() == 4, op, ": expected weight [out_channels, in_channels, kh, kw], got ", describe(w));
  same_dtype(x, w, op);
  check<ShapeError>(w.size(1) == x.size(1), op, ": weight ", describe(w), " expects ", w.size(1),
                    " input channels, but input ", describe(x), " has ", x.size(1));
  check<ShapeError>(w.size(2) >= 1 && w.size(3) >= 1, op, ": weight ", describe(w), " has an empty kernel");
  if (in[2].defined()) {
    same_dtype(x, in[2], op);
    check<ShapeError>(in[2].shape() == Shape{w.size(0)}, op, ": bias must have shape [", w.size(0),
                      "] (the output channels of weight ", describe(w), "), got ", describe(in[2]));
  }
  const auto hw = window_output(x, {w.size(2), w.size(3)}, a.stride, a.padding, op);
  return {{{x.size(0), w.size(0), hw[0], hw[1]}, x.dtype()}};
}

// (grad [N, O, Ho, Wo], x, weight) -> (dx, dweight, dbias [O]).
Specs conv2d_backward(std::span<const Tensor> in, const Attrs& attrs, const char* op) {
  const Tensor &g = in[0], &x = in[1], &w = in[2];
  const Tensor forward_in[] = {x, w, Tensor()};
  const Shape want = conv2d(forward_in, attrs, op)[0].shape;
  same_dtype(g, x, op);
  check<ShapeError>(g.shape() == want, op, ": grad ", describe(g), " does not match the conv2d output ",
                    shape_str(want), " of input ", describe(x), " and weight ", describe(w));
  return {{x.shape(), x.dtype()}, {w.shape(), w.dtype()}, {{w.size(0)}, w.dtype()}};
}

// (x [N, C, ...], running_mean [C], running_var [C], weight? [C], bias? [C]) -> y like x.
Specs batch_norm(std::span<const Tensor> in, const Attrs& attrs, const char* op) {
  check<ValueError>(attr<BatchNormAttrs>(attrs, op).eps >= 0, op, ": eps must be non-negative");
  const Tensor& x = in[0];
  check<ShapeError>(x.dim() >= 2, op, ": expected input [N, C, ...] with at least 2 dims, got ", describe(x));
  const char* names[] = {"", "running_mean", "running_var", "weight", "bias"};
  for (size_t i = 1; i < 5; ++i) check_channel_vector(x, in[i], names[i], op);
  return {{x.shape(), x.dtype()}};
}

// x [N, C, H, W] -> (values [N, C, Ho, Wo], int64 indices h * W + w into each input plane).
Specs max_pool2d(std::span<const Tensor> in, const Attrs& attrs, const char* op) {
  const auto& a = attr<Pool2dAttrs>(attrs, op);
  const Tensor& x = in[0];
  check<ValueError>(a.kernel[0] >= 1 && a.kernel[1] >= 1, op, ": kernel size must be positive, got ",
                    pair_str(a.kernel));
  check_window_attrs(a.stride, a.padding, op);
  check<ValueError>(2 * a.padding[0] <= a.kernel[0] && 2 * a.padding[1] <= a.kernel[1], op, ": padding ",
                    pair_str(a.padding), " must be at most half the kernel size ", pair_str(a.kernel));
  check_image(x, op);
  const auto hw = window_output(x, a.kernel, a.stride, a.padding, op);
  const Shape out{x.size(0), x.size(1), hw[0], hw[1]};
  return {{out, x.dtype()}, {out, DType::i64}};
}

// x [N, C, H, W] -> [N, C, oh, ow].
Specs adaptive_avg_pool2d(std::span<const Tensor> in, const Attrs& attrs, const char* op) {
  const auto& a = attr<AdaptivePoolAttrs>(attrs, op);
  const Tensor& x = in[0];
  check<ValueError>(a.output[0] >= 1 && a.output[1] >= 1, op, ": output size must be positive, got ",
                    pair_str(a.output));
  check_image(x, op);
  check<ShapeError>(x.size(2) >= 1 && x.size(3) >= 1, op, ": input ", describe(x), " has an empty plane");
  return {{{x.size(0), x.size(1), a.output[0], a.output[1]}, x.dtype()}};
}

Specs concat(std::span<const Tensor> in, const Attrs& attrs, const char* op) {
  const int64_t dim = attr<DimAttrs>(attrs, op).dim;
  const Tensor& first = in[0];
  Shape out = first.shape();
  check<ShapeError>(first.dim() > 0, op, ": cannot concatenate 0-dim tensors");
  out[dim] = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const Tensor& t = in[i];
    same_dtype(first, t, op);
    bool ok = t.dim() == first.dim();
    for (int64_t d = 0; ok && d < t.dim(); ++d) ok = d == dim || t.shape()[d] == first.shape()[d];
    check<ShapeError>(ok, op, ": input ", i, " ", describe(t), " does not match input 0 ", describe(first),
                      " outside dim ", dim);
    out[dim] += t.shape()[dim];
  }
  return {{out, first.dtype()}};
}

Specs index_select(std::span<const Tensor> in, const Attrs& attrs, const char* op) {
  const int64_t dim = attr<DimAttrs>(attrs, op).dim;
  index_dtype(in[1], op, "index");
  check<ShapeError>(in[1].dim() == 1, op, ": index must be 1-D, got ", describe(in[1]));
  check<ShapeError>(in[0].dim() > 0, op, ": cannot index a 0-dim tensor");
  Shape out = in[0].shape();
  out[dim] = in[1].numel();
  return {{out, in[0].dtype()}};
}

Specs index_add(std::span<const Tensor> in, const Attrs& attrs, const char* op) {
  const int64_t dim = attr<DimAttrs>(attrs, op).dim;
  const Tensor &base = in[0], &idx = in[1], &src = in[2];
  same_dtype(base, src, op);
  index_dtype(idx, op, "index");
  check<ShapeError>(idx.dim() == 1, op, ": index must be 1-D, got ", describe(idx));
  Shape want = base.shape();
  check<ShapeError>(!want.empty(), op, ": cannot index a 0-dim tensor");
  want[dim] = idx.numel();
  check<ShapeError>(src.shape() == want, op, ": source must have shape ", shape_str(want), " for base ", describe(base),
                    " and ", idx.numel(), " indices, got ", describe(src));
  return {{base.shape(), base.dtype()}};
}

// index_add's inputs, base updated in place: no output.
Specs index_accumulate(std::span<const Tensor> in, const Attrs& attrs, const char* op) {
  index_add(in, attrs, op);
  return {};
}

Specs gather(std::span<const Tensor> in, const Attrs& attrs, const char* op) {
  const int64_t dim = attr<DimAttrs>(attrs, op).dim;
  const Tensor &x = in[0], &idx = in[1];
  index_dtype(idx, op, "index");
  bool ok = idx.dim() == x.dim();
  for (int64_t d = 0; ok && d < x.dim(); ++d) ok = d == dim || idx.shape()[d] <= x.shape()[d];
  check<ShapeError>(ok, op, ": index ", describe(idx), " must have the dims of input ", describe(x),
                    " and be no larger outside dim ", dim);
  return {{idx.shape(), x.dtype()}};
}

Specs scatter_add(std::span<const Tensor> in, const Attrs& attrs, const char* op) {
  const int64_t dim = attr<DimAttrs>(attrs, op).dim;
  const Tensor &base = in[0], &idx = in[1], &src = in[2];
  same_dtype(base, src, op);
  index_dtype(idx, op, "index");
  bool ok = idx.dim() == base.dim();
  for (int64_t d = 0; ok && d < base.dim(); ++d) ok = d == dim || idx.shape()[d] <= base.shape()[d];
  check<ShapeError>(ok, op, ": index ", describe(idx), " must have the dims of base ", describe(base),
                    " and be no larger outside dim ", dim);
  check<ShapeError>(src.shape() == idx.shape(), op, ": source ", describe(src), " must match index ", describe(idx));
  return {{base.shape(), base.dtype()}};
}

Specs masked_fill(std::span<const Tensor> in, const Attrs&, const char* op) {
  mask_dtype(in[1], op, "mask");
  check<ShapeError>(broadcast_shapes(in[0].shape(), in[1].shape(), op) == in[0].shape(), op, ": mask ", describe(in[1]),
                    " must broadcast to the input ", describe(in[0]));
  return {{in[0].shape(), in[0].dtype()}};
}

Specs where(std::span<const Tensor> in, const Attrs&, const char* op) {
  mask_dtype(in[0], op, "condition");
  same_dtype(in[1], in[2], op);
  Shape s = broadcast_shapes(broadcast_shapes(in[0].shape(), in[1].shape(), op), in[2].shape(), op);
  return {{s, in[1].dtype()}};
}

Specs cast(std::span<const Tensor> in, const Attrs& attrs, const char* op) {
  return {{in[0].shape(), attr<CastAttrs>(attrs, op).dtype}};
}

Specs random(std::span<const Tensor>, const Attrs& attrs, const char* op) {
  const auto& a = attr<RandomAttrs>(attrs, op);
  for (int64_t d : a.shape) check<ShapeError>(d >= 0, op, ": negative dimension in shape ", shape_str(a.shape));
  return {{a.shape, a.dtype}};
}

namespace {

// Checks every group of names.size() inputs: the first is float32 or float64, and each
// other defined member has its shape and dtype. Errors name the op, the group and the member.
void check_groups(std::span<const Tensor> in, std::span<const char* const> names, const char* op) {
  const size_t n = names.size();
  for (size_t k = 0; k * n < in.size(); ++k) {
    const Tensor& first = in[k * n];
    check<DTypeError>(kFloat.contains(first.dtype()), op, ": group ", k, ": ", names[0], " ", describe(first),
                      " must be float32 or float64");
    for (size_t j = 1; j < n; ++j) {
      const Tensor& t = in[k * n + j];
      if (!t.defined()) continue;
      check<DTypeError>(t.dtype() == first.dtype(), op, ": group ", k, ": ", names[j], " ", describe(t),
                        " does not match ", names[0], " ", describe(first), " (dtypes differ)");
      check<ShapeError>(t.shape() == first.shape(), op, ": group ", k, ": ", names[j], " ", describe(t),
                        " does not match ", names[0], " ", describe(first));
    }
  }
}

}  // namespace

Specs adam_update(std::span<const Tensor> in, const Attrs& attrs, const char* op) {
  const int64_t step = attr<AdamAttrs>(attrs, op).step;
  check<ValueError>(step >= 1, op, ": step must be >= 1 (bias correction divides by 1 - beta^step), got ", step);
  static constexpr const char* names[] = {"param", "grad", "exp_avg", "exp_avg_sq"};
  check_groups(in, names, op);
  return {};
}

Specs sgd_update(std::span<const Tensor> in, const Attrs& attrs, const char* op) {
  const auto& a = attr<SgdAttrs>(attrs, op);
  static constexpr const char* names[] = {"param", "grad", "momentum_buffer"};
  check_groups(in, names, op);
  for (size_t k = 0; k * 3 < in.size(); ++k)
    check<ValueError>(in[k * 3 + 2].defined() == (a.momentum != 0), op, ": group ", k,
                      a.momentum != 0 ? " has no momentum_buffer" : " has a momentum_buffer", " but momentum is ",
                      a.momentum, " (a buffer goes with momentum != 0, and only then)");
  return {};
}

Specs clip_grad_norm(std::span<const Tensor> in, const Attrs& attrs, const char* op) {
  const double max_norm = attr<ClipAttrs>(attrs, op).max_norm;
  check<ValueError>(max_norm > 0, op, ": max_norm must be > 0 (+inf only measures), got ", max_norm);
  static constexpr const char* names[] = {"grad"};
  check_groups(in, names, op);
  return {{Shape{}, DType::f64}};
}

}  // namespace shape
}  // namespace qkv::autograd
