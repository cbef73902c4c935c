// The tensor-core attention forward for bf16 and f16 (kernels/cuda/attention/flash_attention.cu), private to
// kernels/cuda/attention/attention.cu: same semantics as the float kernels there (GQA groups, bottom-right
// causal masking, an additive [T, S] bias, K and V one tensor read once, the float32 log-sum-exp).
#pragma once
#include "kernels/attrs.h"

namespace qkv::kernels::cuda {

// Whether flash_attention_forward takes these operands: bf16 or f16, head dims D = Dv of 64 or
// 128, every head's rows with a contiguous last dim. Others go through the float kernels.
bool flash_attention_supports(const Tensor& q, const Tensor& k, const Tensor& v);

// out [B, H, T, D] (q's dtype, contiguous), lse [B, H, T] float32 contiguous.
void flash_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& bias,
                             const AttentionAttrs& attrs, const Tensor& out, const Tensor& lse);

}  // namespace qkv::kernels::cuda
