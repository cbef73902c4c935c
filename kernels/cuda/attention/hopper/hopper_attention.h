// The Hopper (sm_90a) attention kernels, called by kernels/cuda/attention (bench_kernels asks the
// dispatch which kernels a case runs on): the FlashAttention-3 design (hopper/forward.cu,
// hopper/backward_*.cu) for bf16 and f16 at head dims 64 and 128, with
// the semantics of the other attention kernels (GQA by index, bottom-right causal masking, the
// (+) variants' additive [T, S] bias, K=V read as one tile, the float32 log-sum-exp).
//
// Dispatch is by the device, not by the build alone: they run where the device has compute
// capability 9.0 and this build carries sm_90a code (CMAKE_CUDA_ARCHITECTURES with 90a; every
// emulated build, whose device is a 9.0), unless QKV_ATTENTION_KERNELS=mma asks for the mma.sync
// kernels (flash_attention.cu), which run everywhere else.
#pragma once
#include "kernels/attrs.h"

namespace qkv::kernels::cuda {

// Whether the Hopper kernels take these operands on q's device: bf16 or f16, D = Dv of 64 or
// 128, every row 16-byte aligned with 16-byte aligned, non-zero strides (what a tensor map needs).
bool hopper_attention_supports(const Tensor& q, const Tensor& k, const Tensor& v);

// As flash_attention_forward (flash_attention.h).
void hopper_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& bias,
                              const AttentionAttrs& attrs, const Tensor& out, const Tensor& lse);

// The backward's dQ, and its dK and dV, into a.dq, a.dk, a.dv, for the operands of
// flash_attention_backward (flash_backward_args.h) with a.delta computed; grad_out mappable too.
struct BackwardArgs;
void hopper_attention_dq(const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v,
                         const BackwardArgs& a);
void hopper_attention_dkdv(const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v,
                           const BackwardArgs& a);

}  // namespace qkv::kernels::cuda
