// The operands of the bf16/f16 attention backward as its kernels take them (private to
// kernels/cuda/attention: flash_attention_backward.cu, hopper/backward_*.cu).
#pragma once
#include <cstdint>

namespace qkv::kernels::cuda {

struct BackwardArgs {
  const uint16_t *q = nullptr, *k = nullptr, *v = nullptr, *g = nullptr, *o = nullptr;
  int64_t qs[3] = {}, ks[3] = {}, vs[3] = {}, gs[3] = {}, os[3] = {};  // element strides of batch, head, row
  const float* lse = nullptr;                                          // [B, H, T] contiguous
  float* delta = nullptr;                                              // [B, H, T] contiguous
  uint16_t *dq = nullptr, *dk = nullptr, *dv = nullptr;                // [B, H, T, D], [B, Hk, S, D] x 2, contiguous
  const uint16_t* bias = nullptr;                                      // [T, S] contiguous, or none
  float* dbias_partial = nullptr;                                      // [B, T, S]: dS summed over the heads
  int64_t B = 0, H = 0, Hk = 0;
  int T = 0, S = 0, group = 1;  // T, S at most 65535 tiles of 64 (checked on the host)
  float scale = 1;
  bool causal = false, kv_shared = false;
  bool vector_loads = false;  // q, k, v, dO rows all start 16-byte aligned
};

}  // namespace qkv::kernels::cuda
