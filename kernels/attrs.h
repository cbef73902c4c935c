// Op attributes: the non-tensor arguments of an op (dims, flags, scalars, seeds). Each op row
// names the one alternative it uses; kernels, shape rules and backward rules read it with
// attr<T>(), which throws if an op was called with the wrong kind.
#pragma once
#include <array>
#include <cstdint>
#include <variant>
#include <vector>

#include "tensor/tensor.h"

namespace qkv {

enum class Reduction : uint8_t { none, mean, sum };
enum class RandomKind : uint8_t { uniform, normal, bernoulli };

struct NoAttrs {};
struct ReduceAttrs {
  std::vector<int64_t> dims;
  bool keepdim = false;
};  // empty dims = all
struct DimAttrs {
  int64_t dim = 0;
  bool keepdim = false;
};
struct ScalarAttrs {
  double value = 0;
};  // pow exponent, fill value
struct GeluAttrs {
  bool tanh = false;
};  // false: exact (erf) form
struct MatmulAttrs {
  bool trans_a = false, trans_b = false;
};
struct LayerNormAttrs {
  double eps = 1e-5;
};
struct CrossEntropyAttrs {
  int64_t ignore_index = -100;
  Reduction reduction = Reduction::mean;
};
// rope: turn by the tables' angles, or (inverse, the backward) by their opposites.
struct RopeAttrs {
  bool inverse = false;
};
struct DropoutAttrs {
  double p = 0;
  uint64_t seed = 0, offset = 0;
};
// dropout_add_layer_norm: sum = x + dropout(y) (p, seed, offset as DropoutAttrs; p = 0: no
// dropout), then the layer norm of sum with eps.
struct DropoutAddNormAttrs {
  double p = 0;
  uint64_t seed = 0, offset = 0;
  double eps = 1e-5;
};
// Scaled dot-product attention: scores = scale * q k^T (+ bias), bottom-right causal mask.
struct AttentionAttrs {
  bool causal = false;
  double scale = 1.0;
};
struct CastAttrs {
  DType dtype = DType::f32;
};
// Spatial pairs are (height, width). conv2d: no dilation, no groups, zero padding.
struct Conv2dAttrs {
  std::array<int64_t, 2> stride{1, 1}, padding{0, 0};
};
// Inference batch norm over dim 1 with the running statistics.
struct BatchNormAttrs {
  double eps = 1e-5;
};
// max_pool2d as PyTorch's (dilation 1, floor mode): padding counts as -inf.
struct Pool2dAttrs {
  std::array<int64_t, 2> kernel{1, 1}, stride{1, 1}, padding{0, 0};
};
// adaptive_avg_pool2d's output size.
struct AdaptivePoolAttrs {
  std::array<int64_t, 2> output{1, 1};
};
// One optimizer step (adam_update, sgd_update): PyTorch's hyperparameters. step is the update
// count of every parameter in the call, this update included (bias correction); decoupled
// selects AdamW's weight decay. first: the SGD momentum buffer starts as the gradient.
struct AdamAttrs {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  int64_t step = 1;
  bool decoupled = false;
};
struct SgdAttrs {
  double lr = 1e-2, momentum = 0, weight_decay = 0;
  bool nesterov = false, first = false;
};
// clip_grad_norm: grads are scaled when max_norm / (norm + 1e-6) < 1; +inf only measures.
// unscale (a power of two: 1 / the loss scale of f16 training) multiplies every grad first, in
// the same pass: the norm and the clipping are those of the unscaled grads.
struct ClipAttrs {
  double max_norm = 1;
  double unscale = 1;
};
struct RandomAttrs {
  RandomKind kind = RandomKind::uniform;
  double a = 0, b = 1;  // uniform [a, b); normal mean a, std b; bernoulli p = a
  Shape shape;
  DType dtype = DType::f32;
  Device device;
  uint64_t seed = 0, offset = 0;
};

using Attrs =
    std::variant<NoAttrs, ReduceAttrs, DimAttrs, ScalarAttrs, GeluAttrs, MatmulAttrs, LayerNormAttrs, CrossEntropyAttrs,
                 DropoutAttrs, DropoutAddNormAttrs, CastAttrs, RandomAttrs, AttentionAttrs, Conv2dAttrs, BatchNormAttrs,
                 Pool2dAttrs, AdaptivePoolAttrs, AdamAttrs, SgdAttrs, ClipAttrs, RopeAttrs>;

template <class T> const T& attr(const Attrs& a, const char* op) {
  const T* p = std::get_if<T>(&a);
  check<ValueError>(p != nullptr, op, ": called with the wrong attribute kind");
  return *p;
}

}  // namespace qkv
