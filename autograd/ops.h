// The ops users call. Each is a thin typed front for one op-table row (or, for the composites
// at the end, a few of them); all go through autograd::call_op, which checks devices and dtypes,
// runs the kernel and records the graph. The optimizer updates (names ending in `_`) work in
// place and are not differentiable.
#pragma once
#include <array>
#include <vector>

#include "kernels/attrs.h"
#include "tensor/random.h"
#include "tensor/tensor.h"

namespace qkv {

// ---- elementwise (binary ops broadcast) ----------------------------------------------------
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);  // bool
Tensor eq(const Tensor& a, const Tensor& b);  // bool
Tensor neg(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor pow(const Tensor& x, double exponent);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor gelu(const Tensor& x, bool tanh_approximation = false);
Tensor gelu_backward(const Tensor& grad, const Tensor& x, bool tanh_approximation = false);
// grad * scale where the relu output y > 0, else 0: relu's backward (scale 1) and relu_dropout's
// (scale 1 / (1 - p)), both read from the output alone.
Tensor relu_backward(const Tensor& grad, const Tensor& y, double scale = 1);
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);

// ---- reductions (empty dims: all dims) -----------------------------------------------------
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor amax(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
struct ValuesIndices {
  Tensor values, indices;
};
ValuesIndices max(const Tensor& x, int64_t dim, bool keepdim = false);  // first maximum wins
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);

// ---- linear algebra and normalization ------------------------------------------------------
// Batched: [..., M, K] @ [..., K, N] with broadcast batch dims; trans_* transpose the last two.
Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a = false, bool trans_b = false);
// A fully connected layer: x [..., K] @ weight [M, K]^T + bias [M] -> [..., M] (bias may be
// undefined), one GEMM over all leading dims. On CUDA one cuBLASLt GEMM adds the bias in its
// epilogue.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias);
// The weight and bias gradients of linear for dy [N, M], x [N, K]: dy^T x [M, K] and the column
// sums of dy [M] (on CUDA one GEMM whose epilogue sums the bias gradient).
std::pair<Tensor, Tensor> linear_weight_grad(const Tensor& dy, const Tensor& x);
// c += op(a) op(b) in place, for 2-D float tensors (c contiguous, outside any graph): a backward
// adding its product to a gradient already summed (grad::linear).
void matmul_accumulate_(const Tensor& c, const Tensor& a, const Tensor& b, bool trans_a = false, bool trans_b = false);
Tensor softmax(const Tensor& x, int64_t dim = -1);
Tensor log_softmax(const Tensor& x, int64_t dim = -1);
// Normalizes over the last dim; weight and bias ([D]) may be undefined.
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5);
struct LayerNormGrads {
  Tensor dx, dweight, dbias;
};
LayerNormGrads layer_norm_backward(const Tensor& grad, const Tensor& x, const Tensor& weight, const Tensor& mean,
                                   const Tensor& rstd);
// The pre-LN residual step in one op: sum = x + dropout(y, p, training, gen) and its layer norm
// (weight, bias [D] may be undefined). Draws the same random numbers as dropout(y, ...), so
// it equals the unfused ops exactly; on CUDA one pass reads x and y and writes both outputs.
struct AddNorm {
  Tensor sum, normed;
};
AddNorm dropout_add_layer_norm(const Tensor& x, const Tensor& y, const Tensor& weight, const Tensor& bias, double p,
                               bool training, Generator* gen, double eps = 1e-5);
// RMS norm over the last dim: x / sqrt(mean(x^2) + eps) * weight (weight [D] may be undefined).
Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps = 1e-6);
struct RmsNormGrads {
  Tensor dx, dweight;
};
RmsNormGrads rms_norm_backward(const Tensor& grad, const Tensor& x, const Tensor& weight, const Tensor& rstd);
// dropout_add_layer_norm's RMS form: sum = x + dropout(y, p, training, gen) and its RMS norm.
AddNorm dropout_add_rms_norm(const Tensor& x, const Tensor& y, const Tensor& weight, double p, bool training,
                             Generator* gen, double eps = 1e-6);

// Rotary position embedding (nn/rope.h makes the tables): x [B, T, H, D], token t at position
// start + t (start: one int64 on x's device, or undefined for 0), turned pair by pair in the
// rotate-half layout by the angles of cos, sin [P, R/2] (read in the dtype the kernel computes
// in: float64 for float64 x, else float32); dims past R unchanged. `inverse` turns the other way (the backward).
struct RotaryTables {
  Tensor cos, sin;
  bool defined() const { return cos.defined(); }
};
Tensor rope(const Tensor& x, const RotaryTables& tables, const Tensor& start = Tensor(), bool inverse = false);

// The SwiGLU gate: h [..., 2F] (the gate projection's F columns, then the up projection's) ->
// silu(gate) * up [..., F].
Tensor swiglu(const Tensor& h);
Tensor swiglu_backward(const Tensor& grad, const Tensor& h);

// ---- lookup, loss, regularization ----------------------------------------------------------
Tensor embedding(const Tensor& weight, const Tensor& ids);
// logits [..., C], target [...] (int32/int64); targets equal to ignore_index add nothing.
Tensor cross_entropy(const Tensor& logits, const Tensor& target, int64_t ignore_index = -100,
                     Reduction reduction = Reduction::mean);
Tensor dropout(const Tensor& x, double p, bool training = true, Generator* gen = nullptr);
// dropout(relu(x), ...) in one pass, drawing the same numbers. Its backward needs no random
// numbers: an element has a gradient exactly where the output is positive.
Tensor relu_dropout(const Tensor& x, double p, bool training = true, Generator* gen = nullptr);

// Fused attention: softmax(scale * q k^T + bias, masked) v without materializing the scores.
// q [B, H, T, D], k [B, Hk, S, D], v [B, Hk, S, Dv] with H a multiple of Hk (query head h reads
// KV head h / (H / Hk)); k and v may be the same tensor; bias [T, S] or undefined; causal masks
// key j for query i when j > i + S - T; scale 0 means 1/sqrt(D). Returns [B, H, T, Dv].
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& bias = Tensor(), bool causal = false,
                 double scale = 0);

// The static decode step's ops: `start`, the position of the first of T new rows, is an int64
// tensor of one element read on the device, so a CUDA graph replays them at every position.
// cache_attention: q [B, H, T, D] of the new rows attends over positions [0, start + T) of a
// preallocated cache k [B, Hk, C, D], v [B, Hk, C, Dv] (k and v may be one tensor), causal
// bottom-right (row t sees positions up to start + t); not differentiable. With `rotary`, the
// cached keys are stored unrotated and turned as they are read (position j by row j of the
// tables): a K=V cache under RoPE stores s once and serves RoPE(s) as keys, s as values. kv_write_:
// cache[:, :, start:start + T] = src [B, Hk, T, D] in place. Either raises an IndexError (on a
// GPU at the next synchronisation) when start + T does not fit the cache.
Tensor cache_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& start, bool causal = true,
                       double scale = 0, const RotaryTables& rotary = {});
void kv_write_(const Tensor& cache, const Tensor& src, const Tensor& start);
// An int8 cache: rows quantized by quantize_int8 (below), read with their float32 scales
// k_scale, v_scale [B, Hk, C, 1] (K=V: the same tensor and scales twice).
Tensor cache_attention_int8(const Tensor& q, const Tensor& k, const Tensor& k_scale, const Tensor& v,
                            const Tensor& v_scale, const Tensor& start, bool causal = true, double scale = 0,
                            const RotaryTables& rotary = {});
// Symmetric int8 rows: x [..., D] -> (q int8 [..., D], scale float32 [..., 1]) with
// scale = max |x| / 127 per row and q = round(x / scale), so |q * scale - x| <= scale / 2.
// A row holding a NaN or inf gets a NaN scale. Not differentiable.
std::pair<Tensor, Tensor> quantize_int8(const Tensor& x);

// ---- convolution, normalization and pooling of images [N, C, H, W] ---------------------------
// Spatial pairs are (height, width), as in PyTorch.
// weight [O, C, kh, kw], bias [O] or undefined; zero padding; returns [N, O, Ho, Wo] with
// Ho = (H + 2 padding - kh) / stride + 1 (likewise Wo).
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
              std::array<int64_t, 2> stride = {1, 1}, std::array<int64_t, 2> padding = {0, 0});
struct Conv2dGrads {
  Tensor dx, dweight, dbias;
};
Conv2dGrads conv2d_backward(const Tensor& grad, const Tensor& x, const Tensor& weight,
                            std::array<int64_t, 2> stride = {1, 1}, std::array<int64_t, 2> padding = {0, 0});
// Inference batch norm over dim 1 of x [N, C, ...] with the given running statistics ([C]);
// weight and bias ([C]) may be undefined. The statistics receive no gradient.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, double eps = 1e-5);
// PyTorch's max_pool2d (floor mode, padding at most half the kernel and never selected);
// stride {0, 0} means the kernel size. Indices (int64) are h * W + w within each input plane.
ValuesIndices max_pool2d(const Tensor& x, std::array<int64_t, 2> kernel, std::array<int64_t, 2> stride = {0, 0},
                         std::array<int64_t, 2> padding = {0, 0});
// Output cell (i, j) averages rows [floor(i H / oh), ceil((i + 1) H / oh)) and likewise columns.
Tensor adaptive_avg_pool2d(const Tensor& x, std::array<int64_t, 2> output_size);

// ---- indexing and joining -------------------------------------------------------------------
Tensor concat(const std::vector<Tensor>& xs, int64_t dim = 0);
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
Tensor index_add(const Tensor& base, int64_t dim, const Tensor& index, const Tensor& src);
// base[..., index[j], ...] += src[..., j, ...] in place (float32/64 base, contiguous, not in a graph).
void index_accumulate_(const Tensor& base, int64_t dim, const Tensor& index, const Tensor& src);
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
Tensor scatter_add(const Tensor& base, int64_t dim, const Tensor& index, const Tensor& src);

// ---- conversion -------------------------------------------------------------------------------
Tensor cast(const Tensor& x, DType dtype);
Tensor copy(const Tensor& x);  // a contiguous copy

// ---- random (Philox; `gen` defaults to default_generator()) --------------------------------
Tensor uniform(const Shape& shape, double low, double high, TensorOptions opts = {}, Generator* gen = nullptr);
Tensor normal(const Shape& shape, double mean, double std, TensorOptions opts = {}, Generator* gen = nullptr);
Tensor bernoulli(const Shape& shape, double p, TensorOptions opts = {}, Generator* gen = nullptr);
Tensor rand(const Shape& shape, TensorOptions opts = {}, Generator* gen = nullptr);
Tensor randn(const Shape& shape, TensorOptions opts = {}, Generator* gen = nullptr);

// ---- optimizer updates, in place (run them under NoGradGuard) ---------------------------------
// One step of torch.optim.Adam / AdamW (attrs.decoupled) on every (param, grad, exp_avg,
// exp_avg_sq) group of `groups`: param and the moments are updated; the grad may be strided, the
// rest must be contiguous. Every group uses the same attrs (step included).
void adam_update_(const std::vector<Tensor>& groups, const AdamAttrs& attrs);
// One step of torch.optim.SGD (dampening 0) on every (param, grad, momentum_buffer) group; the
// buffer is undefined exactly when attrs.momentum is 0.
void sgd_update_(const std::vector<Tensor>& groups, const SgdAttrs& attrs);
// torch.nn.utils.clip_grad_norm_: returns the L2 norm of all grads together (0-dim float64, summed
// in double) and, when max_norm / (norm + 1e-6) < 1, scales every grad by that factor in place.
// A non-finite norm scales nothing; max_norm = +inf only measures. unscale (a power of two)
// multiplies the grads first: f16 training's 1 / loss scale (kernels/attrs.h: ClipAttrs).
Tensor clip_grad_norm_(const std::vector<Tensor>& grads, double max_norm, double unscale = 1);

// ---- composites ---------------------------------------------------------------------------
// Sums a broadcast gradient back down to `shape` (the inverse of broadcasting).
Tensor sum_to(const Tensor& x, const Shape& shape);

// ---- operators (a double operand becomes a 0-dim tensor of the other's dtype and device) ----
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& x);
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(double a, const Tensor& b);
Tensor operator/(double a, const Tensor& b);

}  // namespace qkv
