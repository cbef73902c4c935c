#include "autograd/ops.h"

#include <cmath>

#include "autograd/dispatch.h"
#include "autograd/preflight.h"

namespace qkv {

using autograd::call_op;
using autograd::OpId;

namespace {
Tensor one(OpId id, std::vector<Tensor> in, Attrs attrs = NoAttrs{}) {
  return call_op(id, std::move(in), std::move(attrs))[0];
}
// The double operand of `x * 0.5`: a 0-dim host tensor, whose value a CUDA kernel takes as an
// argument (nothing is allocated on or copied to the device).
Tensor scalar_like(double v, const Tensor& like) { return scalar_tensor(v, {like.dtype(), kCPU}); }
}  // namespace

Tensor add(const Tensor& a, const Tensor& b) { return one(OpId::add, {a, b}); }
Tensor sub(const Tensor& a, const Tensor& b) { return one(OpId::sub, {a, b}); }
Tensor mul(const Tensor& a, const Tensor& b) { return one(OpId::mul, {a, b}); }
Tensor div(const Tensor& a, const Tensor& b) { return one(OpId::div, {a, b}); }
Tensor gt(const Tensor& a, const Tensor& b) { return one(OpId::gt, {a, b}); }
Tensor eq(const Tensor& a, const Tensor& b) { return one(OpId::eq, {a, b}); }
Tensor neg(const Tensor& x) { return one(OpId::neg, {x}); }
Tensor abs(const Tensor& x) { return one(OpId::abs, {x}); }
Tensor exp(const Tensor& x) { return one(OpId::exp, {x}); }
Tensor log(const Tensor& x) { return one(OpId::log, {x}); }
Tensor sqrt(const Tensor& x) { return one(OpId::sqrt, {x}); }
Tensor rsqrt(const Tensor& x) { return one(OpId::rsqrt, {x}); }
Tensor pow(const Tensor& x, double e) { return one(OpId::pow, {x}, ScalarAttrs{e}); }
Tensor tanh(const Tensor& x) { return one(OpId::tanh, {x}); }
Tensor sigmoid(const Tensor& x) { return one(OpId::sigmoid, {x}); }
Tensor relu(const Tensor& x) { return one(OpId::relu, {x}); }
Tensor gelu(const Tensor& x, bool t) { return one(OpId::gelu, {x}, GeluAttrs{t}); }
Tensor gelu_backward(const Tensor& g, const Tensor& x, bool t) {
  return one(OpId::gelu_backward, {g, x}, GeluAttrs{t});
}
Tensor relu_backward(const Tensor& g, const Tensor& y, double scale) {
  return one(OpId::relu_backward, {g, y}, ScalarAttrs{scale});
}
Tensor masked_fill(const Tensor& x, const Tensor& m, double v) {
  return one(OpId::masked_fill, {x, m}, ScalarAttrs{v});
}
Tensor where(const Tensor& c, const Tensor& a, const Tensor& b) { return one(OpId::where, {c, a, b}); }

namespace {
Tensor reduction(OpId id, const char* name, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return one(id, {x}, ReduceAttrs{normalize_dims(dims, x.dim(), name), keepdim});
}
}  // namespace

Tensor sum(const Tensor& x, const std::vector<int64_t>& d, bool k) { return reduction(OpId::sum, "sum", x, d, k); }
Tensor mean(const Tensor& x, const std::vector<int64_t>& d, bool k) { return reduction(OpId::mean, "mean", x, d, k); }
Tensor amax(const Tensor& x, const std::vector<int64_t>& d, bool k) { return reduction(OpId::amax, "amax", x, d, k); }

ValuesIndices max(const Tensor& x, int64_t dim, bool keepdim) {
  auto out = call_op(OpId::max, {x}, DimAttrs{wrap_dim(dim, x.dim(), "max"), keepdim});
  return {out[0], out[1]};
}
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) { return max(x.detach(), dim, keepdim).indices; }

Tensor matmul(const Tensor& a, const Tensor& b, bool ta, bool tb) {
  return one(OpId::matmul, {a, b}, MatmulAttrs{ta, tb});
}
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b) { return one(OpId::linear, {x, w, b}); }
void matmul_accumulate_(const Tensor& c, const Tensor& a, const Tensor& b, bool trans_a, bool trans_b) {
  call_op(OpId::matmul_accumulate, {c, a, b}, MatmulAttrs{trans_a, trans_b});
}
std::pair<Tensor, Tensor> linear_weight_grad(const Tensor& dy, const Tensor& x) {
  auto out = call_op(OpId::linear_weight_grad, {dy, x});
  return {out[0], out[1]};
}
Tensor softmax(const Tensor& x, int64_t dim) {
  return one(OpId::softmax, {x}, DimAttrs{wrap_dim(dim, x.dim(), "softmax")});
}
Tensor log_softmax(const Tensor& x, int64_t dim) {
  return one(OpId::log_softmax, {x}, DimAttrs{wrap_dim(dim, x.dim(), "log_softmax")});
}

Tensor layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, double eps) {
  check<ValueError>(eps >= 0, "layer_norm: eps must be non-negative, got ", eps);
  return one(OpId::layer_norm, {x, w, b}, LayerNormAttrs{eps});
}

namespace {
// A dropout mask over x's elements: p, and the generator's (seed, offset) with x.numel() numbers
// reserved (gen, or the process-wide one). A preflight reserves nothing.
DropoutAttrs draw_dropout(const Tensor& x, double p, Generator* gen) {
  Generator& g = gen ? *gen : default_generator();
  return {p, g.seed(), autograd::tracing_ops() ? 0 : g.reserve(x.numel())};
}
}  // namespace

LayerNormGrads layer_norm_backward(const Tensor& g, const Tensor& x, const Tensor& w, const Tensor& mean,
                                   const Tensor& rstd) {
  auto out = call_op(OpId::layer_norm_backward, {g, x, w, mean, rstd});
  return {out[0], out[1], out[2]};
}

namespace {
// The attributes of a fused residual step: eps, and the numbers dropout(y, p, training, gen)
// would draw.
DropoutAddNormAttrs add_norm_attrs(const Tensor& y, double p, bool training, Generator* gen, double eps,
                                   const char* op) {
  check<ValueError>(p >= 0 && p <= 1, op, ": p must be in [0, 1], got ", p);
  check<ValueError>(eps >= 0, op, ": eps must be non-negative, got ", eps);
  DropoutAddNormAttrs attrs{0, 0, 0, eps};
  if (training && p > 0) {
    const DropoutAttrs d = draw_dropout(y, p, gen);
    attrs.p = p;
    attrs.seed = d.seed;
    attrs.offset = d.offset;
  }
  return attrs;
}
}  // namespace

AddNorm dropout_add_layer_norm(const Tensor& x, const Tensor& y, const Tensor& w, const Tensor& b, double p,
                               bool training, Generator* gen, double eps) {
  auto out = call_op(OpId::dropout_add_layer_norm, {x, y, w, b},
                     add_norm_attrs(y, p, training, gen, eps, "dropout_add_layer_norm"));
  return {out[3], out[0]};
}

Tensor rms_norm(const Tensor& x, const Tensor& w, double eps) {
  check<ValueError>(eps >= 0, "rms_norm: eps must be non-negative, got ", eps);
  return one(OpId::rms_norm, {x, w}, LayerNormAttrs{eps});
}

RmsNormGrads rms_norm_backward(const Tensor& g, const Tensor& x, const Tensor& w, const Tensor& rstd) {
  auto out = call_op(OpId::rms_norm_backward, {g, x, w, rstd});
  return {out[0], out[1]};
}

AddNorm dropout_add_rms_norm(const Tensor& x, const Tensor& y, const Tensor& w, double p, bool training, Generator* gen,
                             double eps) {
  auto out =
      call_op(OpId::dropout_add_rms_norm, {x, y, w}, add_norm_attrs(y, p, training, gen, eps, "dropout_add_rms_norm"));
  return {out[2], out[0]};
}

Tensor rope(const Tensor& x, const RotaryTables& t, const Tensor& start, bool inverse) {
  return one(OpId::rope, {x, t.cos, t.sin, start}, RopeAttrs{inverse});
}

Tensor swiglu(const Tensor& h) { return one(OpId::swiglu, {h}); }
Tensor swiglu_backward(const Tensor& g, const Tensor& h) { return one(OpId::swiglu_backward, {g, h}); }

Tensor embedding(const Tensor& weight, const Tensor& ids) { return one(OpId::embedding, {weight, ids}); }

Tensor cross_entropy(const Tensor& logits, const Tensor& target, int64_t ignore_index, Reduction reduction) {
  return one(OpId::cross_entropy, {logits, target}, CrossEntropyAttrs{ignore_index, reduction});
}

Tensor dropout(const Tensor& x, double p, bool training, Generator* gen) {
  check<ValueError>(p >= 0 && p <= 1, "dropout: p must be in [0, 1], got ", p);
  if (!training || p == 0) return x;
  return one(OpId::dropout, {x}, draw_dropout(x, p, gen));
}

Tensor relu_dropout(const Tensor& x, double p, bool training, Generator* gen) {
  check<ValueError>(p >= 0 && p <= 1, "relu_dropout: p must be in [0, 1], got ", p);
  if (!training || p == 0) return relu(x);
  return one(OpId::relu_dropout, {x}, draw_dropout(x, p, gen));
}

namespace {
// The score scale: the caller's, or 1/sqrt(head dim) for 0.
double attention_scale(const char* op, const Tensor& q, double scale) {
  check<ValueError>(scale >= 0, op, ": scale must be non-negative (0 picks 1/sqrt(head dim)), got ", scale);
  return scale > 0 ? scale : 1.0 / std::sqrt(double(q.defined() && q.dim() == 4 ? q.size(3) : 1));
}
}  // namespace

Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& bias, bool causal, double scale) {
  scale = attention_scale("attention", q, scale);
  return one(OpId::attention, {q, k, v, bias}, AttentionAttrs{causal, scale});
}

Tensor cache_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& start, bool causal,
                       double scale, const RotaryTables& rotary) {
  scale = attention_scale("cache_attention", q, scale);
  return one(OpId::cache_attention, {q, k, v, start, Tensor(), Tensor(), rotary.cos, rotary.sin},
             AttentionAttrs{causal, scale});
}
void kv_write_(const Tensor& cache, const Tensor& src, const Tensor& start) {
  call_op(OpId::kv_write, {cache, src, start}, NoAttrs{});
}

Tensor cache_attention_int8(const Tensor& q, const Tensor& k, const Tensor& k_scale, const Tensor& v,
                            const Tensor& v_scale, const Tensor& start, bool causal, double scale,
                            const RotaryTables& rotary) {
  scale = attention_scale("cache_attention", q, scale);
  return one(OpId::cache_attention, {q, k, v, start, k_scale, v_scale, rotary.cos, rotary.sin},
             AttentionAttrs{causal, scale});
}

std::pair<Tensor, Tensor> quantize_int8(const Tensor& x) {
  std::vector<Tensor> out = call_op(OpId::quantize_int8, {x}, NoAttrs{});
  return {out[0], out[1]};
}

Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b, std::array<int64_t, 2> stride,
              std::array<int64_t, 2> padding) {
  return one(OpId::conv2d, {x, w, b}, Conv2dAttrs{stride, padding});
}

Conv2dGrads conv2d_backward(const Tensor& g, const Tensor& x, const Tensor& w, std::array<int64_t, 2> stride,
                            std::array<int64_t, 2> padding) {
  auto out = call_op(OpId::conv2d_backward, {g, x, w}, Conv2dAttrs{stride, padding});
  return {out[0], out[1], out[2]};
}

Tensor batch_norm(const Tensor& x, const Tensor& mean, const Tensor& var, const Tensor& w, const Tensor& b,
                  double eps) {
  return one(OpId::batch_norm, {x, mean, var, w, b}, BatchNormAttrs{eps});
}

ValuesIndices max_pool2d(const Tensor& x, std::array<int64_t, 2> kernel, std::array<int64_t, 2> stride,
                         std::array<int64_t, 2> padding) {
  if (stride == std::array<int64_t, 2>{0, 0}) stride = kernel;
  auto out = call_op(OpId::max_pool2d, {x}, Pool2dAttrs{kernel, stride, padding});
  return {out[0], out[1]};
}

Tensor adaptive_avg_pool2d(const Tensor& x, std::array<int64_t, 2> output_size) {
  return one(OpId::adaptive_avg_pool2d, {x}, AdaptivePoolAttrs{output_size});
}

Tensor concat(const std::vector<Tensor>& xs, int64_t dim) {
  check<ValueError>(!xs.empty() && xs[0].defined(), "concat: expected at least one tensor");
  return one(OpId::concat, xs, DimAttrs{wrap_dim(dim, xs[0].dim(), "concat")});
}

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  return one(OpId::index_select, {x, index}, DimAttrs{wrap_dim(dim, x.dim(), "index_select")});
}
Tensor index_add(const Tensor& base, int64_t dim, const Tensor& index, const Tensor& src) {
  return one(OpId::index_add, {base, index, src}, DimAttrs{wrap_dim(dim, base.dim(), "index_add")});
}
void index_accumulate_(const Tensor& base, int64_t dim, const Tensor& index, const Tensor& src) {
  call_op(OpId::index_accumulate, {base, index, src}, DimAttrs{wrap_dim(dim, base.dim(), "index_accumulate")});
}
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  return one(OpId::gather, {x, index}, DimAttrs{wrap_dim(dim, x.dim(), "gather")});
}
Tensor scatter_add(const Tensor& base, int64_t dim, const Tensor& index, const Tensor& src) {
  return one(OpId::scatter_add, {base, index, src}, DimAttrs{wrap_dim(dim, base.dim(), "scatter_add")});
}

Tensor cast(const Tensor& x, DType dtype) { return one(OpId::cast, {x}, CastAttrs{dtype}); }
Tensor copy(const Tensor& x) { return one(OpId::copy, {x}); }

void adam_update_(const std::vector<Tensor>& groups, const AdamAttrs& attrs) {
  call_op(OpId::adam_update, groups, attrs);
}
void sgd_update_(const std::vector<Tensor>& groups, const SgdAttrs& attrs) { call_op(OpId::sgd_update, groups, attrs); }
Tensor clip_grad_norm_(const std::vector<Tensor>& grads, double max_norm, double unscale) {
  return one(OpId::clip_grad_norm, grads, ClipAttrs{max_norm, unscale});
}

namespace {
Tensor random(OpId id, RandomKind kind, const Shape& shape, double a, double b, TensorOptions opts, Generator* gen) {
  Generator& g = gen ? *gen : default_generator();
  RandomAttrs attrs{kind, a, b, shape, opts.dtype, opts.device, g.seed(), 0};
  autograd::shape::random({}, attrs, autograd::op_info(id).name);  // validate before drawing
  attrs.offset = autograd::tracing_ops() ? 0 : g.reserve(numel(shape));
  return one(id, {}, attrs);
}
}  // namespace

Tensor uniform(const Shape& s, double lo, double hi, TensorOptions o, Generator* g) {
  check<ValueError>(lo <= hi, "uniform: low ", lo, " is above high ", hi);
  return random(OpId::uniform, RandomKind::uniform, s, lo, hi, o, g);
}
Tensor normal(const Shape& s, double m, double sd, TensorOptions o, Generator* g) {
  check<ValueError>(sd >= 0, "normal: std must be non-negative, got ", sd);
  return random(OpId::normal, RandomKind::normal, s, m, sd, o, g);
}
Tensor bernoulli(const Shape& s, double p, TensorOptions o, Generator* g) {
  check<ValueError>(p >= 0 && p <= 1, "bernoulli: p must be in [0, 1], got ", p);
  return random(OpId::bernoulli, RandomKind::bernoulli, s, p, 0, o, g);
}
Tensor rand(const Shape& s, TensorOptions o, Generator* g) { return uniform(s, 0, 1, o, g); }
Tensor randn(const Shape& s, TensorOptions o, Generator* g) { return normal(s, 0, 1, o, g); }

Tensor sum_to(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  const int64_t lead = x.dim() - int64_t(shape.size());
  check<ShapeError>(lead >= 0, "sum_to: cannot reduce ", shape_str(x.shape()), " to ", shape_str(shape));
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (d < lead || (shape[size_t(d - lead)] == 1 && x.shape()[size_t(d)] != 1)) dims.push_back(d);
  Tensor r = dims.empty() ? x : sum(x, dims, /*keepdim=*/true);
  return r.reshape(shape);
}

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator-(const Tensor& x) { return neg(x); }
Tensor operator+(const Tensor& a, double b) { return add(a, scalar_like(b, a)); }
Tensor operator-(const Tensor& a, double b) { return sub(a, scalar_like(b, a)); }
Tensor operator*(const Tensor& a, double b) { return mul(a, scalar_like(b, a)); }
Tensor operator/(const Tensor& a, double b) { return div(a, scalar_like(b, a)); }
Tensor operator+(double a, const Tensor& b) { return add(scalar_like(a, b), b); }
Tensor operator-(double a, const Tensor& b) { return sub(scalar_like(a, b), b); }
Tensor operator*(double a, const Tensor& b) { return mul(scalar_like(a, b), b); }
Tensor operator/(double a, const Tensor& b) { return div(scalar_like(a, b), b); }

}  // namespace qkv
