// Tensor-core building blocks of the bf16/f16 flash attention kernels (the forward in
// flash_attention.cu, the backward in flash_attention_backward.cu), private to kernels/cuda:
// the tile sizes, cooperative tile loads from strided [B, H, L, D] operands into padded shared
// tiles, and the bottom-right causal masking rule; the fragment loads and products on the tensor
// cores are in flash_fragments.cuh.
#pragma once
#include <cstdint>

#include "kernels/cuda/attention/flash_fragments.cuh"
#include "kernels/cuda/launch.cuh"
#include "tensor/tensor.h"

namespace qkv::kernels::cuda::flash {

inline constexpr int kWarps = 4;
inline constexpr int kThreads = kWarps * 32;
inline constexpr int kTile = 64;  // rows per block tile (16 per warp) and keys per key tile
inline constexpr int kPad = 8;    // 16 bytes more per shared row: the 8 rows of an ldmatrix hit distinct banks
inline constexpr unsigned kAll = 0xffffffffu;

// Query row i sees keys [0, visible(a, i)): all, or bottom-right causal (j <= i + S - T), for
// any argument struct with T, S and causal.
template <class Args> __device__ __forceinline__ int64_t visible(const Args& a, int64_t i) {
  if (!a.causal) return a.S;
  const int64_t e = i + 1 + a.S - a.T;
  return e < 0 ? 0 : e > a.S ? a.S : e;
}

// dst[r][c] = rows r0 + r of head (b, h) for r < Rows (zeros past `rows`), c < D; dst's row
// stride is D + kPad. All kThreads threads of the block call it.
template <int D, int Rows = kTile>
__device__ __forceinline__ void load_tile(uint16_t* dst, const uint16_t* base, const int64_t (&st)[3], int64_t b,
                                          int64_t h, int64_t r0, int64_t rows, bool vector_loads) {
  constexpr int kChunks = D / 8;
  const uint16_t* head = base + b * st[0] + h * st[1];
  for (int idx = int(threadIdx.x); idx < Rows * kChunks; idx += kThreads) {
    const int r = idx / kChunks, c = (idx % kChunks) * 8;
    uint16_t* d = dst + r * (D + kPad) + c;
    const int64_t row = r0 + r;
    if (row >= rows) {
      *reinterpret_cast<uint4*>(d) = make_uint4(0, 0, 0, 0);
      continue;
    }
    const uint16_t* s = head + row * st[2] + c;
    if (vector_loads) *reinterpret_cast<uint4*>(d) = *reinterpret_cast<const uint4*>(s);
    else
#pragma unroll
      for (int e = 0; e < 8; ++e) d[e] = s[e];
  }
}

// ---- host side ------------------------------------------------------------------------------

// Whether every row of t [B, H, L, D] starts 16-byte aligned: tiles load 8 elements at a time.
inline bool aligned16(const Tensor& t) {
  return reinterpret_cast<uintptr_t>(t.raw_data()) % 16 == 0 && t.stride(0) % 8 == 0 && t.stride(1) % 8 == 0 &&
         t.stride(2) % 8 == 0;
}

inline const uint16_t* bits(const Tensor& t) { return static_cast<const uint16_t*>(t.raw_data()); }

}  // namespace qkv::kernels::cuda::flash
