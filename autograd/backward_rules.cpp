#include "autograd/backward_rules.h"

#include <tuple>

#include "autograd/dispatch.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "tensor/view.h"

namespace qkv::autograd::grad {
namespace {

using Grads = std::vector<Tensor>;

const Shape& shape_of(const BackwardArgs& a, size_t i) { return a.input_meta[i].shape; }

// The reduced gradient g (shape of the reduction's output) broadcast back over `in_shape`.
Tensor unreduce(const Tensor& g, const Shape& in_shape, const std::vector<int64_t>& dims, bool keepdim) {
  Tensor r = g;
  if (!keepdim)
    for (int64_t d : dims) r = r.unsqueeze(d);  // dims are sorted ascending
  return r.expand(in_shape);
}

int64_t reduced_count(const Shape& s, const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= s[size_t(d)];
  return n;
}

Tensor zero_like_meta(const TensorMeta& m) { return zeros(m.shape, {m.dtype, m.device}); }

}  // namespace

Grads add(const BackwardArgs& a) { return {sum_to(a.grads[0], shape_of(a, 0)), sum_to(a.grads[0], shape_of(a, 1))}; }
Grads sub(const BackwardArgs& a) { return {sum_to(a.grads[0], shape_of(a, 0)), -sum_to(a.grads[0], shape_of(a, 1))}; }

Grads mul(const BackwardArgs& a) {
  const Tensor& g = a.grads[0];
  return {a.needs_grad[0] ? sum_to(g * a.inputs[1], shape_of(a, 0)) : Tensor(),
          a.needs_grad[1] ? sum_to(g * a.inputs[0], shape_of(a, 1)) : Tensor()};
}

Grads div(const BackwardArgs& a) {
  const Tensor &g = a.grads[0], &x = a.inputs[0], &y = a.inputs[1];
  return {a.needs_grad[0] ? sum_to(g / y, shape_of(a, 0)) : Tensor(),
          a.needs_grad[1] ? sum_to(-(g * x) / (y * y), shape_of(a, 1)) : Tensor()};
}

Grads neg(const BackwardArgs& a) { return {-a.grads[0]}; }
Grads abs(const BackwardArgs& a) {
  const Tensor& x = a.inputs[0];
  return {where(gt(x, scalar_tensor(0, {x.dtype(), kCPU})), a.grads[0], -a.grads[0])};
}
Grads exp(const BackwardArgs& a) { return {a.grads[0] * a.outputs[0]}; }
Grads log(const BackwardArgs& a) { return {a.grads[0] / a.inputs[0]}; }
Grads sqrt(const BackwardArgs& a) { return {a.grads[0] / (a.outputs[0] * 2.0)}; }
Grads rsqrt(const BackwardArgs& a) { return {a.grads[0] * pow(a.outputs[0], 3.0) * -0.5}; }

Grads pow(const BackwardArgs& a) {
  const double p = attr<ScalarAttrs>(a.attrs, "pow").value;
  if (p == 0) return {zeros_like(a.grads[0])};
  return {a.grads[0] * qkv::pow(a.inputs[0], p - 1) * p};
}

Grads tanh(const BackwardArgs& a) {
  const Tensor& y = a.outputs[0];
  return {a.grads[0] * (1.0 - y * y)};
}
Grads sigmoid(const BackwardArgs& a) {
  const Tensor& y = a.outputs[0];
  return {a.grads[0] * y * (1.0 - y)};
}
Grads relu(const BackwardArgs& a) { return {relu_backward(a.grads[0], a.outputs[0])}; }
Grads gelu(const BackwardArgs& a) {
  return {gelu_backward(a.grads[0], a.inputs[0], attr<GeluAttrs>(a.attrs, "gelu").tanh)};
}

Grads sum(const BackwardArgs& a) {
  const auto& r = attr<ReduceAttrs>(a.attrs, "sum");
  return {unreduce(a.grads[0], shape_of(a, 0), r.dims, r.keepdim)};
}

Grads mean(const BackwardArgs& a) {
  const auto& r = attr<ReduceAttrs>(a.attrs, "mean");
  return {unreduce(a.grads[0] / double(reduced_count(shape_of(a, 0), r.dims)), shape_of(a, 0), r.dims, r.keepdim)};
}

// Ties share the gradient equally, as PyTorch's amax does.
Grads amax(const BackwardArgs& a) {
  const auto& r = attr<ReduceAttrs>(a.attrs, "amax");
  const Tensor& x = a.inputs[0];
  const Shape& s = shape_of(a, 0);
  Tensor is_max = eq(x, unreduce(a.outputs[0], s, r.dims, r.keepdim));
  Tensor count = sum(cast(is_max, x.dtype()), r.dims, /*keepdim=*/true);
  Tensor share = unreduce(a.grads[0], s, r.dims, r.keepdim) / count.expand(s);
  return {where(is_max, share, scalar_tensor(0, {x.dtype(), x.device()}))};
}

Grads max(const BackwardArgs& a) {
  const auto& d = attr<DimAttrs>(a.attrs, "max");
  const TensorMeta& m = a.input_meta[0];
  if (m.shape.empty()) return {a.grads[0]};
  Tensor idx = d.keepdim ? a.outputs[1] : a.outputs[1].unsqueeze(d.dim);
  Tensor g = d.keepdim ? a.grads[0] : a.grads[0].unsqueeze(d.dim);
  return {scatter_add(zero_like_meta(m), d.dim, idx, g)};
}

// C = op(A) op(B). Each gradient is one more matmul with transpose flags, then summed over
// broadcast batch dims.
Grads matmul(const BackwardArgs& a) {
  const auto& f = attr<MatmulAttrs>(a.attrs, "matmul");
  const Tensor &g = a.grads[0], &A = a.inputs[0], &B = a.inputs[1];
  Tensor ga, gb;
  if (a.needs_grad[0])
    ga = sum_to(f.trans_a ? qkv::matmul(B, g, f.trans_b, true) : qkv::matmul(g, B, false, !f.trans_b), shape_of(a, 0));
  if (a.needs_grad[1])
    gb = sum_to(f.trans_b ? qkv::matmul(g, A, true, f.trans_a) : qkv::matmul(A, g, !f.trans_a, false), shape_of(a, 1));
  return {ga, gb};
}

namespace {

// Whether a gradient is pending for input i that this backward may add into in place: float32
// or float64 like `like`, on its device, contiguous, of `shape`, and seen by nothing else (the
// engine's slot holds the only handle to it and to its storage).
bool can_fold_into_pending(const BackwardArgs& a, size_t i, const Tensor& like, const Shape& shape) {
  const Tensor* sum = a.pending ? a.pending->peek(i) : nullptr;
  if (!sum || !kFloat.contains(like.dtype())) return false;
  const bool fits = sum->dtype() == like.dtype() && sum->device() == like.device() && sum->shape() == shape &&
                    sum->is_contiguous() && !sum->requires_grad();
  return fits && sum->impl_ptr().use_count() == 1 && sum->storage().use_count() == 1;
}

}  // namespace

// y = x w^T + b: dx = dy w, and dw with db from one weight-gradient op (on CUDA one GEMM whose
// epilogue also sums db). When x has a gradient pending already (an x that Q, K and V read, and
// the residual stream), the GEMM adds dy w into it instead of into a new tensor that the engine
// would then add.
Grads linear(const BackwardArgs& a) {
  const Tensor &dy = a.grads[0], &x = a.inputs[0], &w = a.inputs[1];
  // dy [..., M] as a matrix [N, M] (a view, or a copy of a strided one), as the weight-gradient
  // GEMMs and matmul_accumulate take it; dx = dy w keeps x's leading dims.
  const Tensor dy_rows = raw::as_matrix(dy);
  Tensor dx, dw, db;
  if (a.needs_grad[0]) {
    if (can_fold_into_pending(a, 0, dy, a.input_meta[0].shape)) {
      dx = a.pending->take(0);
      matmul_accumulate_(raw::as_matrix(dx), dy_rows, w);  // dx is contiguous: a view, written in place
    } else {
      dx = qkv::matmul(dy, w);
    }
  }
  if (a.needs_grad[2]) std::tie(dw, db) = linear_weight_grad(dy_rows, raw::as_matrix(x));
  else if (a.needs_grad[1]) dw = qkv::matmul(dy_rows, raw::as_matrix(x), /*trans_a=*/true);
  if (!a.needs_grad[1]) dw = Tensor();
  return {dx, dw, db};
}

Grads softmax(const BackwardArgs& a) {
  const int64_t dim = attr<DimAttrs>(a.attrs, "softmax").dim;
  const Tensor &g = a.grads[0], &y = a.outputs[0];
  return {y * (g - sum(g * y, {dim}, true))};
}

Grads log_softmax(const BackwardArgs& a) {
  const int64_t dim = attr<DimAttrs>(a.attrs, "log_softmax").dim;
  const Tensor &g = a.grads[0], &y = a.outputs[0];
  return {g - qkv::exp(y) * sum(g, {dim}, true)};
}

Grads layer_norm(const BackwardArgs& a) {
  LayerNormGrads r = layer_norm_backward(a.grads[0], a.inputs[0], a.inputs[1], a.outputs[1], a.outputs[2]);
  return {r.dx, a.input_meta[1].defined ? r.dweight : Tensor(), a.input_meta[2].defined ? r.dbias : Tensor()};
}

// Outputs (normed, mean, rstd, sum = x + dropout(y)): the sum's gradient is the layer norm's
// plus its own (the residual stream's); x takes it as is, y through the same dropout mask.
Grads dropout_add_layer_norm(const BackwardArgs& a) {
  const auto& at = attr<DropoutAddNormAttrs>(a.attrs, "dropout_add_layer_norm");
  LayerNormGrads ln = layer_norm_backward(a.grads[0], a.outputs[3], a.inputs[2], a.outputs[1], a.outputs[2]);
  // A post-norm block reads only the normed output: no gradient reached the sum.
  const Tensor dsum = a.grad_arrived[3] ? ln.dx + a.grads[3] : ln.dx;
  Tensor dy = dsum;
  if (at.p > 0) dy = call_op(OpId::dropout, {dsum}, DropoutAttrs{at.p, at.seed, at.offset})[0];
  return {dsum, dy, a.input_meta[2].defined ? ln.dweight : Tensor(), a.input_meta[3].defined ? ln.dbias : Tensor()};
}

Grads rms_norm(const BackwardArgs& a) {
  RmsNormGrads r = rms_norm_backward(a.grads[0], a.inputs[0], a.inputs[1], a.outputs[1]);
  return {r.dx, a.input_meta[1].defined ? r.dweight : Tensor()};
}

// Outputs (normed, rstd, sum = x + dropout(y)), as dropout_add_layer_norm's.
Grads dropout_add_rms_norm(const BackwardArgs& a) {
  const auto& at = attr<DropoutAddNormAttrs>(a.attrs, "dropout_add_rms_norm");
  RmsNormGrads n = rms_norm_backward(a.grads[0], a.outputs[2], a.inputs[2], a.outputs[1]);
  const Tensor dsum = a.grad_arrived[2] ? n.dx + a.grads[2] : n.dx;
  Tensor dy = dsum;
  if (at.p > 0) dy = call_op(OpId::dropout, {dsum}, DropoutAttrs{at.p, at.seed, at.offset})[0];
  return {dsum, dy, a.input_meta[2].defined ? n.dweight : Tensor()};
}

// The rotation's transpose is the opposite rotation; the tables and the start are constants.
Grads rope(const BackwardArgs& a) {
  const bool inverse = attr<RopeAttrs>(a.attrs, "rope").inverse;
  return {qkv::rope(a.grads[0], {a.inputs[1], a.inputs[2]}, a.inputs[3], !inverse), Tensor(), Tensor(), Tensor()};
}

Grads swiglu(const BackwardArgs& a) { return {swiglu_backward(a.grads[0], a.inputs[0])}; }

Grads cross_entropy(const BackwardArgs& a) {
  const Tensor dx =
      call_op(OpId::cross_entropy_backward, {a.grads[0], a.inputs[0], a.inputs[1], a.outputs[1]}, a.attrs)[0];
  return {dx, Tensor()};
}

Grads dropout(const BackwardArgs& a) {
  // The same mask (same seed and offset) applied to the gradient.
  return {call_op(OpId::dropout, {a.grads[0]}, a.attrs)[0]};
}

// The output is positive exactly where relu passed x and the mask kept it: no random numbers.
Grads relu_dropout(const BackwardArgs& a) {
  const double p = attr<DropoutAttrs>(a.attrs, "relu_dropout").p;
  return {relu_backward(a.grads[0], a.outputs[0], p < 1 ? 1 / (1 - p) : 0)};
}

Grads attention(const BackwardArgs& a) {
  const auto& in = a.inputs;
  const std::vector<Tensor> g =
      call_op(OpId::attention_backward, {a.grads[0], in[0], in[1], in[2], in[3], a.outputs[0], a.outputs[1]}, a.attrs);
  return {g[0], g[1], g[2], a.input_meta[3].defined ? g[3] : Tensor()};
}

Grads conv2d(const BackwardArgs& a) {
  const auto& f = attr<Conv2dAttrs>(a.attrs, "conv2d");
  Conv2dGrads g = conv2d_backward(a.grads[0], a.inputs[0], a.inputs[1], f.stride, f.padding);
  return {a.needs_grad[0] ? g.dx : Tensor(), a.needs_grad[1] ? g.dweight : Tensor(),
          a.input_meta[2].defined ? g.dbias : Tensor()};
}

namespace {
// [1, C, 1, ...]: a per-channel vector shaped to broadcast over an input of `rank` dims.
Tensor per_channel(const Tensor& v, int64_t rank) {
  Shape s(size_t(rank), 1);
  s[1] = v.numel();
  return v.reshape(s);
}
std::vector<int64_t> all_but_channels(int64_t rank) {
  std::vector<int64_t> dims{0};
  for (int64_t d = 2; d < rank; ++d) dims.push_back(d);
  return dims;
}
}  // namespace

// y = xhat w + b with xhat = (x - mean) rstd and the running statistics held fixed:
// dx = g w rstd, dweight = sum of g xhat, dbias = sum of g (over every dim but the channels).
Grads batch_norm(const BackwardArgs& a) {
  const double eps = attr<BatchNormAttrs>(a.attrs, "batch_norm").eps;
  const Tensor &g = a.grads[0], &x = a.inputs[0], &w = a.inputs[3];
  const int64_t rank = x.dim();
  const Tensor rstd = per_channel(qkv::rsqrt(a.inputs[2] + eps), rank);
  Tensor dx, dw, db;
  if (a.needs_grad[0]) dx = g * (w.defined() ? rstd * per_channel(w, rank) : rstd);
  if (a.needs_grad[3]) dw = qkv::sum(g * ((x - per_channel(a.inputs[1], rank)) * rstd), all_but_channels(rank));
  if (a.needs_grad[4]) db = qkv::sum(g, all_but_channels(rank));
  return {dx, Tensor(), Tensor(), dw, db};
}

// Each output's gradient goes to the input element its index names (h * W + w of its plane).
Grads max_pool2d(const BackwardArgs& a) {
  const TensorMeta& m = a.input_meta[0];
  const Shape& s = m.shape;
  const Shape& o = a.outputs[1].shape();
  const Shape flat_out{o[0], o[1], o[2] * o[3]};
  Tensor dx = zeros({s[0], s[1], s[2] * s[3]}, {m.dtype, m.device});
  return {qkv::scatter_add(dx, 2, a.outputs[1].reshape(flat_out), a.grads[0].reshape(flat_out)).reshape(s)};
}

namespace {
// Adaptive average pooling along one axis as a matrix A [out, n]: row i averages the bin
// [floor(i n / out), ceil((i + 1) n / out)) (the bins of kernels/cpu/pool.cpp).
Tensor adaptive_matrix(int64_t out, int64_t n, const TensorMeta& m) {
  std::vector<double> v(size_t(out * n), 0.0);
  for (int64_t i = 0; i < out; ++i) {
    const int64_t begin = i * n / out, end = ((i + 1) * n + out - 1) / out;
    for (int64_t j = begin; j < end; ++j) v[size_t(i * n + j)] = 1.0 / double(end - begin);
  }
  return raw::to(from_vector(v, {out, n}), m.dtype, m.device);
}
}  // namespace

// The pooling is separable, y = A_h x A_w^T per plane, so dx = A_h^T g A_w: each output's
// gradient spread evenly over its bin.
Grads adaptive_avg_pool2d(const BackwardArgs& a) {
  const TensorMeta& m = a.input_meta[0];
  const Shape& o = a.grads[0].shape();
  const Tensor ah = adaptive_matrix(o[2], m.shape[2], m), aw = adaptive_matrix(o[3], m.shape[3], m);
  return {qkv::matmul(qkv::matmul(ah, a.grads[0], /*trans_a=*/true), aw)};
}

Grads concat(const BackwardArgs& a) {
  const int64_t dim = attr<DimAttrs>(a.attrs, "concat").dim;
  Grads out;
  int64_t at = 0;
  for (const TensorMeta& m : a.input_meta) {
    const int64_t n = m.shape[size_t(dim)];
    out.push_back(a.grads[0].slice(dim, at, at + n));
    at += n;
  }
  return out;
}

namespace {

// The rows of g added at `index` along `dim` into a tensor like input 0: in place into input 0's
// pending gradient where one may be written (a tied weight: the GPT's embedding and output
// layer, whose dense gradient is a [vocab, d] matrix), else into zeros. Each [vocab, d] pass saved
// is a pass over the whole table: copying it out of the pending sum, or adding two of them.
Tensor add_rows_to_pending(const BackwardArgs& a, int64_t dim, const Tensor& index, const Tensor& g) {
  const TensorMeta& m = a.input_meta[0];
  if (!kFloat.contains(g.dtype()) || g.dtype() != m.dtype) return index_add(zero_like_meta(m), dim, index, g);
  Tensor base = can_fold_into_pending(a, 0, g, m.shape) ? a.pending->take(0) : zero_like_meta(m);
  index_accumulate_(base, dim, index, g);
  return base;
}

}  // namespace

Grads embedding(const BackwardArgs& a) {
  const Tensor& ids = a.inputs[1];
  const TensorMeta& w = a.input_meta[0];
  return {add_rows_to_pending(a, 0, ids.reshape({-1}), a.grads[0].reshape({-1, w.shape[1]})), Tensor()};
}

Grads index_select(const BackwardArgs& a) {
  const int64_t dim = attr<DimAttrs>(a.attrs, "index_select").dim;
  return {add_rows_to_pending(a, dim, a.inputs[1], a.grads[0]), Tensor()};
}

Grads index_add(const BackwardArgs& a) {
  const int64_t dim = attr<DimAttrs>(a.attrs, "index_add").dim;
  return {a.grads[0], Tensor(), a.needs_grad[2] ? index_select(a.grads[0], dim, a.inputs[1]) : Tensor()};
}

Grads gather(const BackwardArgs& a) {
  const int64_t dim = attr<DimAttrs>(a.attrs, "gather").dim;
  return {scatter_add(zero_like_meta(a.input_meta[0]), dim, a.inputs[1], a.grads[0]), Tensor()};
}

Grads scatter_add(const BackwardArgs& a) {
  const int64_t dim = attr<DimAttrs>(a.attrs, "scatter_add").dim;
  return {a.grads[0], Tensor(), a.needs_grad[2] ? gather(a.grads[0], dim, a.inputs[1]) : Tensor()};
}

Grads masked_fill(const BackwardArgs& a) { return {qkv::masked_fill(a.grads[0], a.inputs[1], 0.0), Tensor()}; }

Grads where(const BackwardArgs& a) {
  const Tensor &g = a.grads[0], &c = a.inputs[0];
  Tensor zero = scalar_tensor(0, {g.dtype(), g.device()});
  return {Tensor(), a.needs_grad[1] ? sum_to(qkv::where(c, g, zero), shape_of(a, 1)) : Tensor(),
          a.needs_grad[2] ? sum_to(qkv::where(c, zero, g), shape_of(a, 2)) : Tensor()};
}

Grads cast(const BackwardArgs& a) { return {qkv::cast(a.grads[0], a.input_meta[0].dtype)}; }
Grads copy(const BackwardArgs& a) { return {a.grads[0]}; }

}  // namespace qkv::autograd::grad
