// The shape rules of a Llama-style block's ops: RMS norm (alone, its backward, after a residual
// add), rotary position embedding and the SwiGLU gate.
#include <array>

#include "autograd/shape_checks.h"
#include "autograd/shape_rules.h"

namespace qkv::autograd::shape {

using Specs = std::vector<OutputSpec>;

Specs rms_norm(std::span<const Tensor> in, const Attrs& attrs, const char* op) {
  Specs s = layer_norm(std::array<Tensor, 3>{in[0], in[1], Tensor()}, attrs, op);  // y, mean, rstd
  return {s[0], s[2]};
}

Specs rms_norm_backward(std::span<const Tensor> in, const Attrs& attrs, const char* op) {
  Specs s = layer_norm_backward(in, attrs, op);  // dx, dweight, dbias
  return {s[0], s[1]};
}

Specs dropout_add_rms_norm(std::span<const Tensor> in, const Attrs& attrs, const char* op) {
  Specs s = dropout_add_layer_norm(std::array<Tensor, 4>{in[0], in[1], in[2], Tensor()}, attrs, op);
  return {s[0], s[2], s[3]};  // normed, rstd, sum
}

Specs rope(std::span<const Tensor> in, const Attrs&, const char* op) {
  const Tensor& x = in[0];
  check<ShapeError>(x.dim() == 4, op, ": expected x [batch, len, heads, dim], got ", describe(x));
  rope_tables(in[1], in[2], x.size(3), op);
  if (in[3].defined()) position_scalar(in[3], op, "start");
  return {{x.shape(), x.dtype()}};
}

Specs swiglu(std::span<const Tensor> in, const Attrs&, const char* op) {
  const Tensor& h = in[0];
  check<ShapeError>(h.dim() >= 1 && h.size(-1) % 2 == 0, op,
                    ": expected [..., 2F] (the gate's F columns, then the up projection's), got ", describe(h));
  Shape out = h.shape();
  out.back() /= 2;
  return {{out, h.dtype()}};
}

Specs swiglu_backward(std::span<const Tensor> in, const Attrs& attrs, const char* op) {
  const Tensor &g = in[0], &h = in[1];
  same_dtype(g, h, op);
  check<ShapeError>(swiglu(in.subspan(1, 1), attrs, op)[0].shape == g.shape(), op, ": grad ", describe(g),
                    " does not match the gate's output for ", describe(h));
  return {{h.shape(), h.dtype()}};
}

}  // namespace qkv::autograd::shape
