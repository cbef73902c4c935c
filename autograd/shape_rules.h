// Shape rules: validate an op's inputs and give its outputs' shapes and dtypes. Every error
// names the op and the offending shapes / dtypes, since this is where bad user input is caught.
#pragma once
#include <span>
#include <vector>

#include "kernels/attrs.h"

namespace qkv::autograd {

struct OutputSpec {
  Shape shape;
  DType dtype;
  // The dims in memory order, outermost first (empty: row-major). The output is stored row-major
  // over the dims in this order and viewed in `shape`'s: an attention output stored as its query
  // is ([B, H, T, D] heads of a [B, T, H, D] projection) merges back into [B, T, H * D] as a view.
  // Kernels of such a row write through the output's strides.
  Shape order = {};
};

using ShapeRule = std::vector<OutputSpec> (*)(std::span<const Tensor> in, const Attrs& attrs, const char* op);

namespace shape {

std::vector<OutputSpec> broadcast(std::span<const Tensor>, const Attrs&, const char* op);  // a, b same dtype
std::vector<OutputSpec> compare(std::span<const Tensor>, const Attrs&, const char* op);    // -> bool
std::vector<OutputSpec> same(std::span<const Tensor>, const Attrs&, const char* op);       // like input 0
std::vector<OutputSpec> same_pair(std::span<const Tensor>, const Attrs&, const char* op);  // two of one shape
std::vector<OutputSpec> reduce(std::span<const Tensor>, const Attrs&, const char* op);
std::vector<OutputSpec> reduce_dim(std::span<const Tensor>, const Attrs&, const char* op);  // values, indices
std::vector<OutputSpec> matmul(std::span<const Tensor>, const Attrs&, const char* op);
// x [N, K], w [M, K], b? [M] -> y [N, M].
std::vector<OutputSpec> linear(std::span<const Tensor>, const Attrs&, const char* op);
// dy [N, M], x [N, K] -> dw [M, K], db [M].
std::vector<OutputSpec> linear_weight_grad(std::span<const Tensor>, const Attrs&, const char* op);
std::vector<OutputSpec> matmul_accumulate(std::span<const Tensor>, const Attrs&, const char* op);  // (c, a, b)
std::vector<OutputSpec> layer_norm(std::span<const Tensor>, const Attrs&, const char* op);
std::vector<OutputSpec> layer_norm_backward(std::span<const Tensor>, const Attrs&, const char* op);
// x, y [..., D], weight? bias? [D] -> normed [..., D], mean, rstd [...], sum [..., D].
std::vector<OutputSpec> dropout_add_layer_norm(std::span<const Tensor>, const Attrs&, const char* op);
// x, weight? [D] -> y [..., D], rstd [...]; its backward (grad, x, weight?, rstd) -> dx, dweight.
std::vector<OutputSpec> rms_norm(std::span<const Tensor>, const Attrs&, const char* op);
std::vector<OutputSpec> rms_norm_backward(std::span<const Tensor>, const Attrs&, const char* op);
// x, y [..., D], weight? [D] -> normed [..., D], rstd [...], sum [..., D].
std::vector<OutputSpec> dropout_add_rms_norm(std::span<const Tensor>, const Attrs&, const char* op);
// x [B, T, H, D], cos, sin [P, R/2], start? -> like x.
std::vector<OutputSpec> rope(std::span<const Tensor>, const Attrs&, const char* op);
// h [..., 2F] -> [..., F]; its backward (grad [..., F], h) -> [..., 2F].
std::vector<OutputSpec> swiglu(std::span<const Tensor>, const Attrs&, const char* op);
std::vector<OutputSpec> swiglu_backward(std::span<const Tensor>, const Attrs&, const char* op);
std::vector<OutputSpec> embedding(std::span<const Tensor>, const Attrs&, const char* op);
std::vector<OutputSpec> cross_entropy(std::span<const Tensor>, const Attrs&, const char* op);
std::vector<OutputSpec> cross_entropy_backward(std::span<const Tensor>, const Attrs&, const char* op);
std::vector<OutputSpec> attention(std::span<const Tensor>, const Attrs&, const char* op);
std::vector<OutputSpec> attention_backward(std::span<const Tensor>, const Attrs&, const char* op);
std::vector<OutputSpec> cache_attention(std::span<const Tensor>, const Attrs&, const char* op);
std::vector<OutputSpec> quantize_int8(std::span<const Tensor>, const Attrs&, const char* op);
std::vector<OutputSpec> kv_write(std::span<const Tensor>, const Attrs&, const char* op);
// Convolution and pooling over [N, C, H, W] (attrs: kernels/attrs.h).
std::vector<OutputSpec> conv2d(std::span<const Tensor>, const Attrs&, const char* op);  // x, w, bias?
std::vector<OutputSpec> conv2d_backward(std::span<const Tensor>, const Attrs&,
                                        const char* op);  // g, x, w -> dx, dw, db
std::vector<OutputSpec> batch_norm(std::span<const Tensor>, const Attrs&, const char* op);
std::vector<OutputSpec> max_pool2d(std::span<const Tensor>, const Attrs&, const char* op);  // values, indices
std::vector<OutputSpec> adaptive_avg_pool2d(std::span<const Tensor>, const Attrs&, const char* op);
std::vector<OutputSpec> concat(std::span<const Tensor>, const Attrs&, const char* op);
std::vector<OutputSpec> index_select(std::span<const Tensor>, const Attrs&, const char* op);
std::vector<OutputSpec> index_add(std::span<const Tensor>, const Attrs&, const char* op);
std::vector<OutputSpec> index_accumulate(std::span<const Tensor>, const Attrs&, const char* op);  // base written
std::vector<OutputSpec> gather(std::span<const Tensor>, const Attrs&, const char* op);
std::vector<OutputSpec> scatter_add(std::span<const Tensor>, const Attrs&, const char* op);
std::vector<OutputSpec> masked_fill(std::span<const Tensor>, const Attrs&, const char* op);
std::vector<OutputSpec> where(std::span<const Tensor>, const Attrs&, const char* op);
std::vector<OutputSpec> cast(std::span<const Tensor>, const Attrs&, const char* op);
std::vector<OutputSpec> random(std::span<const Tensor>, const Attrs&, const char* op);
// The in-place optimizer ops: every group's tensors match its first (the param, or the grad of
// clip_grad_norm) in shape and dtype. No outputs, except clip_grad_norm's 0-dim float64 norm.
std::vector<OutputSpec> adam_update(std::span<const Tensor>, const Attrs&, const char* op);     // (p, g, m, v)+
std::vector<OutputSpec> sgd_update(std::span<const Tensor>, const Attrs&, const char* op);      // (p, g, buf?)+
std::vector<OutputSpec> clip_grad_norm(std::span<const Tensor>, const Attrs&, const char* op);  // grads -> norm

}  // namespace shape

// "float32 [2, 3]" — how errors describe a tensor.
std::string describe(const Tensor& t);

}  // namespace qkv::autograd
