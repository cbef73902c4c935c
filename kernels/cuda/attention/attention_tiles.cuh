// Tiling helpers of the fused attention kernels (kernels/cuda/attention/attention.cu, private to it): the
// problem description passed to every kernel, the masking rule, the shared-memory layouts of
// the three passes, and cooperative loads of row tiles from strided [B, H, L, C] operands.
//
// Shared-memory layouts, in elements of F (W warps per block, 4W rows or keys per block tile):
//   forward  Q [4W][D] | K [32][D+1] | V [32][Dv+1]        (V absent when K = V: V aliases K)
//   rows     Q [4W][D] | dO [4W][Dv] | K [32][D+1] | V [32][Dv+1]          (dq and dbias)
//   keys     K [4W][D] | V [4W][Dv] | Q [32][D+1] | dO [32][Dv+1]          (dk and dv)
// A tile whose rows are read one per lane gets a padded stride (+1) so the lanes of a warp hit
// different banks; a tile read by broadcast (every lane the same row) is packed.
#pragma once
#include "kernels/cuda/launch.cuh"

namespace qkv::kernels::cuda::attention_tiles {

inline constexpr int kMaxThreads = 256;         // 8 warps at most per block
inline constexpr int kRowsPerWarp = 4;          // query rows (or keys) each warp owns in a block tile
inline constexpr int kKeyTile = kWarp;          // keys (or query rows) scored across the lanes
inline constexpr int kSlots = 8;                // output columns per lane: lane, lane + 32, ...
inline constexpr int kMaxDim = kSlots * kWarp;  // 256: the largest D and Dv
inline constexpr unsigned kFullMask = 0xffffffffu;

// A [B, H, L, C] operand whose last dim is contiguous: rows are read in place with its strides.
template <class F> struct HeadRows {
  const F* p = nullptr;
  int64_t s0 = 0, s1 = 0, s2 = 0;
  __device__ __forceinline__ const F* row(int64_t b, int64_t h, int64_t i) const {
    return p + b * s0 + h * s1 + i * s2;
  }
};

template <class F> __device__ __forceinline__ F dot(const F* x, const F* y, int n) {
  F s = F(0);
  for (int d = 0; d < n; ++d) s += x[d] * y[d];
  return s;
}

// acc[s] += w_j * rows[j * ld + c] for j < n and the lane's columns c = lane + 32 s < cols, w_j
// being lane j's `w` (all lanes of the warp call it together: it shuffles).
template <class F>
__device__ __forceinline__ void add_weighted_rows(F (&acc)[kSlots], F w, const F* rows, int ld, int n, int cols,
                                                  int lane) {
  for (int j = 0; j < n; ++j) {
    const F wj = __shfl_sync(kFullMask, w, j);
    const F* row = rows + j * ld;
#pragma unroll
    for (int s = 0; s < kSlots; ++s) {
      const int c = lane + kWarp * s;
      if (c < cols) acc[s] += wj * row[c];
    }
  }
}

// out[c] = scale * acc[s] for the lane's columns c = lane + 32 s < cols.
template <class F>
__device__ __forceinline__ void store_scaled(F* out, const F (&acc)[kSlots], F scale, int cols, int lane) {
#pragma unroll
  for (int s = 0; s < kSlots; ++s) {
    const int c = lane + kWarp * s;
    if (c < cols) out[c] = scale * acc[s];
  }
}

// Everything a kernel needs to know about one attention call.
template <class F> struct Attn {
  HeadRows<F> q, k, v;                                    // [B, H, T, D], [B, Hk, S, D], [B, Hk, S, Dv]
  const F* bias = nullptr;                                // contiguous [T, S], or null
  int64_t B = 0, H = 0, Hk = 0, T = 0, S = 0, group = 1;  // group = H / Hk
  int D = 0, Dv = 0;
  F scale = F(1);
  bool causal = false;
  bool kv_shared = false;  // k and v are one tensor: its tiles are loaded once, for both roles

  // Query row i sees keys [0, visible(i)): all, or bottom-right causal (j <= i + S - T).
  __device__ __forceinline__ int64_t visible(int64_t i) const {
    if (!causal) return S;
    const int64_t e = i + 1 + S - T;
    return e < 0 ? 0 : e > S ? S : e;
  }
  // scale * <q_i, k_j> + bias[i, j], from rows already in shared memory.
  __device__ __forceinline__ F score(const F* qrow, const F* krow, int64_t i, int64_t j) const {
    F s = scale * dot(qrow, krow, D);
    if (bias) s += bias[i * S + j];
    return s;
  }
};

// How many keys of the tile [j0, j0 + nj) a row that sees [0, vis_end) sees: a prefix.
__device__ __forceinline__ int keys_in_tile(int64_t vis_end, int64_t j0, int nj) {
  const int64_t n = vis_end - j0;
  return n < 0 ? 0 : n > nj ? nj : int(n);
}

enum class Pass { forward, rows, keys };

// Offsets (elements) and row strides of the shared tiles; `total` sizes the allocation.
struct Layout {
  int q = 0, g = 0, k = 0, v = 0, total = 0;
  int ldq = 0, ldg = 0, ldk = 0, ldv = 0;
};

__host__ __device__ inline Layout layout(Pass pass, int warps, int D, int Dv, bool kv_shared) {
  const int tile = kRowsPerWarp * warps;
  Layout l;
  if (pass == Pass::keys) {
    l.ldk = D;
    l.ldv = kv_shared ? D : Dv;
    l.ldq = D + 1;
    l.ldg = Dv + 1;
    l.k = 0;
    l.v = kv_shared ? l.k : l.k + tile * l.ldk;
    l.q = kv_shared ? l.k + tile * l.ldk : l.v + tile * l.ldv;
    l.g = l.q + kKeyTile * l.ldq;
    l.total = l.g + kKeyTile * l.ldg;
    return l;
  }
  l.ldq = D;
  l.ldg = pass == Pass::rows ? Dv : 0;
  l.ldk = D + 1;
  l.ldv = kv_shared ? D + 1 : Dv + 1;
  l.q = 0;
  l.g = l.q + tile * l.ldq;
  l.k = l.g + tile * l.ldg;  // the forward has no dO tile (ldg 0)
  l.v = kv_shared ? l.k : l.k + kKeyTile * l.ldk;
  l.total = kv_shared ? l.k + kKeyTile * l.ldk : l.v + kKeyTile * l.ldv;
  return l;
}

// dst[r * ld + c] = src.row(b, h, r0 + r)[c] for r < n, c < cols: the whole block, coalesced
// along c. Rows past n are left untouched (and never read).
template <class F>
__device__ __forceinline__ void load_rows(F* dst, int ld, const HeadRows<F>& src, int64_t b, int64_t h, int64_t r0,
                                          int n, int cols) {
  for (int idx = int(threadIdx.x); idx < n * cols; idx += int(blockDim.x)) {
    const int r = idx / cols, c = idx % cols;
    dst[r * ld + c] = src.row(b, h, r0 + r)[c];
  }
}

}  // namespace qkv::kernels::cuda::attention_tiles
