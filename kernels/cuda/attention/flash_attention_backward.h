// The tensor-core attention backward for bf16 and f16 (kernels/cuda/attention/flash_attention_backward.cu),
// private to kernels/cuda/attention/attention.cu: same semantics as the float backward there (GQA groups,
// bottom-right causal masking, K and V one tensor read once, rows that saw no key give nothing),
// deterministic (every output element is accumulated by one thread in a fixed order, no atomics).
#pragma once
#include "kernels/attrs.h"

namespace qkv::kernels::cuda {

// Whether flash_attention_backward takes these operands: bf16 or f16, head dims D = Dv of 64 or
// 128, every head's rows with a contiguous last dim, and no bias or a contiguous [T, S] one in
// q's dtype.
bool flash_attention_backward_supports(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& bias);

// grad_out and out [B, H, T, D] in q's dtype with a contiguous last dim, lse [B, H, T] float32
// contiguous (the forward's), bias [T, S] or undefined -> dq [B, H, T, D], dk [B, Hk, S, D],
// dv [B, Hk, S, D] and, with a bias, dbias [T, S] (the sum of dS over batch and heads), contiguous
// in q's dtype. dk and dv are written separately also when k and v are one tensor.
void flash_attention_backward(const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v,
                              const Tensor& bias, const Tensor& out, const Tensor& lse, const AttentionAttrs& attrs,
                              const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dbias);

}  // namespace qkv::kernels::cuda
