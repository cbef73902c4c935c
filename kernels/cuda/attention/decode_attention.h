// Split-KV attention for decoding (kernels/cuda/attention/decode_attention.cu), private to
// kernels/cuda/attention/attention.cu: a few new query rows against a long cache fill the GPU by splitting
// the keys across blocks, each block serving every query head of one KV head (a K=V or GQA cache
// chunk is read once for all of them), and a second kernel merges the splits' softmax states.
#pragma once
#include "kernels/attrs.h"
#include "tensor/tensor.h"

namespace qkv::kernels::cuda {

// Whether these operands are a decode step this path takes: q in float32, bf16 or f16, k and v
// in q's dtype or int8; no bias; at most 8 query rows; group x rows at most 16; head dims at most
// 256; keys at least 128, or any number with `any_length` (fewer are faster on the flash kernels,
// which need the position on the host: a CUDA graph's capture cannot read it). `rotary`: the
// keys are turned as read (a K=V cache then loads its tile twice, as keys and as values).
bool split_kv_supports(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& bias, bool any_length = false,
                       bool rotary = false);

// What a KV cache adds to the operands: `start` (device memory, or nullptr): the new rows' first
// position, as cache_attention takes it: attend over keys [0, *start + T) only, the launch
// planned for all S. An int8 k and v come with their float32 row scales [B, Hk, S, 1]. Keys
// stored unrotated come with the rotary tables cos, sin [P >= S, R/2]: key row j is turned by
// row j as it is read.
struct CacheExtras {
  const int64_t* start = nullptr;
  Tensor k_scale, v_scale, cos, sin;
};

// out [B, H, T, Dv] (q's dtype, contiguous), lse [B, H, T] float32 contiguous; q, k, v with a
// contiguous last dim.
void split_kv_attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionAttrs& attrs,
                        const Tensor& out, const Tensor& lse, const CacheExtras& cache = {});

}  // namespace qkv::kernels::cuda
