// FlashAttention-2 backward on the tensor cores for bf16 and f16: mma.sync m16n8k16 with float32
// accumulation (kernels/cuda/attention/flash_mma.cuh for the fragment layouts), probabilities recomputed
// from the forward's float32 log-sum-exp, P and dS rounded to the input dtype for their products
// (as FlashAttention does). Semantics as the float backward in kernels/cuda/attention/attention.cu: query
// head h reads KV head h / group, bottom-right causal masking, a row that saw no key (lse -inf)
// gets dq 0 and adds nothing, K and V as one tensor loaded into shared memory once per tile.
//
// Three launches (four with a bias), no atomics (every output element is summed by one thread in
// a fixed order, so the same bits every run):
//   delta   delta[b, h, i] = <dO_i, O_i> in float32, one warp per row.
//   dk, dv  one block per (b, KV head hk, 64-key tile). Warp w owns keys 16w .. 16w+15 of the
//           tile and keeps dK and dV for them in float32 registers; the block loops over the
//           group's query heads h (hk * group ..) and their query chunks of BQ rows (64 for
//           D = 64, 32 for D = 128), skipping chunks none of whose rows sees the tile (causal).
//           Per chunk, with keys as the mma rows (everything transposed):
//             S^T  = K Q^T                  A: K rows (ldmatrix),   B: Q stored [query][d]
//             P^T  = exp(scale S^T - lse)   0 where masked or lse = -inf (per query column)
//             dV  += P^T dO                 A: P^T from the accumulators, B: dO [query][dv] .trans
//           then, 16 queries at a time (only 8 dP^T floats live):
//             dP^T = V dO^T                 A: V rows,              B: dO stored [query][dv]
//             dS^T = P^T (dP^T - delta)
//             dK  += dS^T Q                 A: dS^T from the accumulators, B: Q [query][d] .trans
//           and at the end dK * scale and dV are written once. Lane holds, of every product with
//           keys as rows, keys g = lane / 4 and g + 8 of the warp's 16 and, in each 8-wide
//           n-block, queries 2t and 2t + 1 (t = lane % 4): per-query values (lse, delta, the
//           causal limit) are read per column, from shared memory.
//           K=V: one shared tile serves as K and as V. dk and dv are separate outputs (the
//           autograd rule returns both, and sums them into the one tensor's gradient), so they
//           are accumulated and written separately.
//   dq      one block per (b, h, 64-query tile), warp w owning its rows 16w .. 16w+15, looping
//           over the key tiles up to the last one the tile's rows see:
//             S = Q K^T, P = exp(scale S - lse), dP = dO V^T, dS = P (dP - delta), dQ += dS K
//           (B of the last from K stored [key][d], .trans); dQ * scale written once. Here lane
//           holds query rows g and g + 8, so lse and delta are two registers.
//   dbias   with the additive [T, S] bias (the (+) variants' 2D positional scores), which every
//           kernel adds to scale S before the softmax: one block per (b, 64-query tile, 64-key
//           tile) recomputes dS as the dq kernel does for each head h in order (the K and V tile
//           reloaded when h enters the next KV head) and sums it over the heads in float32
//           registers into partial[b] [T, S]; the sum over b is the column reduction of
//           kernels/cuda/reduce.cu (fixed order).
// Registers: at D = 128 the dK and dV accumulators alone take 2 x 64 floats per thread, so the
// query chunk is 32 there (S^T 16 floats) rather than 64; every kernel fits without spills (ptxas
// -v), the dk/dv one at 3 blocks per SM for D = 64 and 2 for D = 128, except the dk/dv kernel's
// bias instantiation, which spills 40 bytes at D = 64 and 28 at D = 128.
#include <cstdint>

#include "kernels/cuda/attention/flash_attention.h"
#include "kernels/cuda/attention/flash_attention_backward.h"
#include "kernels/cuda/attention/flash_backward_args.h"
#include "kernels/cuda/attention/flash_mma.cuh"
#include "kernels/cuda/attention/hopper/hopper_attention.h"
#include "kernels/cuda/attention/hopper/tensor_maps.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/layout.h"
#include "tensor/cuda/check.h"
#include "tensor/view.h"

namespace qkv::kernels::cuda {
namespace {

using flash::acc_to_a;
using flash::aligned16;
using flash::bits;
using flash::Half16;
using flash::kPad;
using flash::kThreads;
using flash::kTile;
using flash::load_a;
using flash::mma_times_kn;
using flash::mma_times_nk;
using flash::load_b_nk;
using flash::load_tile;
using flash::mma_16816;
using flash::visible;

constexpr int kDeltaThreads = 256;  // 8 rows per block

// Query rows per chunk of the dk/dv kernel (see the register note above).
template <int D> inline constexpr int kQueryChunk = D == 64 ? 64 : 32;
// Blocks per SM the register allocation must allow (__launch_bounds__): as many as fit without
// spills (ptxas -v: capped at 168 registers for 3 blocks, the D = 64 kernels fit; at D = 128 both
// spill there and use up to 255 for 2 blocks).
template <int D> inline constexpr int kDkdvBlocks = D == 64 ? 3 : 2;
template <int D> inline constexpr int kDqBlocks = D == 64 ? 3 : 2;

// The bias of query row i and key j (both in range), 0 without one.
template <bool kBF16> __device__ __forceinline__ float bias_at(const BackwardArgs& a, int64_t i, int64_t j) {
  return a.bias ? Half16<kBF16>::to_float(a.bias[i * a.S + j]) : 0.f;
}

// delta[r] = <dO_r, O_r> for every row r of [B, H, T]: one warp per row, lane c summing columns
// c, c + 32, ..., then a fixed shuffle tree.
template <int D, bool kBF16>
__global__ void __launch_bounds__(kDeltaThreads) flash_delta_kernel(BackwardArgs a, int64_t rows) {
  using H16 = Half16<kBF16>;
  const int lane = int(threadIdx.x) % kWarp;
  const int64_t first = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp;
  const int64_t step = int64_t(gridDim.x) * blockDim.x / kWarp;
  for (int64_t r = first; r < rows; r += step) {  // warp-uniform
    const int64_t b = r / (a.H * a.T), h = (r / a.T) % a.H, i = r % a.T;
    const uint16_t* gr = a.g + b * a.gs[0] + h * a.gs[1] + i * a.gs[2];
    const uint16_t* orow = a.o + b * a.os[0] + h * a.os[1] + i * a.os[2];
    float s = 0.f;
#pragma unroll
    for (int c = lane; c < D; c += kWarp) s += H16::to_float(gr[c]) * H16::to_float(orow[c]);
    s = warp_reduce(s, SumOp{});
    if (lane == 0) a.delta[r] = s;
  }
}

// One block per (b, KV head, 64-key tile): dk = scale * sum dS^T Q and dv = sum P^T dO over the
// group's query heads and all the query rows that see the tile. kBias: a.bias is set (a separate
// instantiation, so that the common case keeps its registers free of the bias's addressing).
template <int D, bool kBF16, bool kBias>
__global__ void __launch_bounds__(kThreads, kDkdvBlocks<D>) flash_dkdv_kernel(BackwardArgs a) {
  using H16 = Half16<kBF16>;
  constexpr int LD = D + kPad, BQ = kQueryChunk<D>;
  const float kNegInf = -CUDART_INF_F;
  QKV_DYNAMIC_SHARED(unsigned char, smem_raw);
  uint16_t* Ks = reinterpret_cast<uint16_t*>(smem_raw);                    // [kTile][LD] keys j0 ..
  uint16_t* Qs = Ks + kTile * LD;                                          // [BQ][LD] query rows i0 ..
  uint16_t* Gs = Qs + BQ * LD;                                             // [BQ][LD] their dO rows
  float* Ls = reinterpret_cast<float*>(Gs + BQ * LD);                      // [BQ] their lse (-inf past T)
  float* Ds = Ls + BQ;                                                     // [BQ] their delta
  uint16_t* Vs = a.kv_shared ? Ks : reinterpret_cast<uint16_t*>(Ds + BQ);  // K=V: one tile, both roles

  const int warp = int(threadIdx.x) / kWarp, lane = int(threadIdx.x) % kWarp, g = lane / 4, t = lane % 4;
  const int64_t bhk = blockIdx.x, b = bhk / a.Hk, hk = bhk % a.Hk;
  const int64_t j0 = int64_t(blockIdx.y) * kTile;
  load_tile<D>(Ks, a.k, a.ks, b, hk, j0, a.S, a.vector_loads);  // rows past S are zeros
  if (!a.kv_shared) load_tile<D>(Vs, a.v, a.vs, b, hk, j0, a.S, a.vector_loads);
  // (the first chunk's barrier below publishes these tiles)

  // This lane's keys (accumulator rows g and g + 8 of the warp's 16), relative to the tile.
  const int kr[2] = {warp * 16 + g, warp * 16 + g + 8};
  float dk[D / 8][4], dv[D / 8][4];  // n-block n: columns 8n + 2t, +1 of keys kr[0] (0, 1), kr[1] (2, 3)
#pragma unroll
  for (int n = 0; n < D / 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) dk[n][e] = dv[n][e] = 0.f;

#pragma unroll 1
  for (int64_t h = hk * a.group; h < (hk + 1) * a.group; ++h) {
    const int64_t bh = b * a.H + h;
#pragma unroll 1
    for (int64_t i0 = 0; i0 < a.T; i0 += BQ) {
      const int64_t last = (i0 + BQ < a.T ? i0 + BQ : a.T) - 1;
      if (visible(a, last) <= j0) continue;  // block-uniform: no row of the chunk sees our keys
      __syncthreads();                       // the previous chunk's readers are done
      load_tile<D, BQ>(Qs, a.q, a.qs, b, h, i0, a.T, a.vector_loads);
      load_tile<D, BQ>(Gs, a.g, a.gs, b, h, i0, a.T, a.vector_loads);
      for (int c = int(threadIdx.x); c < BQ; c += kThreads) {
        const int64_t i = i0 + c;
        Ls[c] = i < a.T ? a.lse[bh * a.T + i] : kNegInf;
        Ds[c] = i < a.T ? a.delta[bh * a.T + i] : 0.f;
      }
      __syncthreads();

      // Key kr[r] (tile-relative) is seen by query c (chunk-relative) iff j0 + kr[r] < visible(i0 +
      // c): j0 + kr[r] < S, causally kr[r] - c < diag = i0 + 1 + S - T - j0 (clamped to the range
      // of kr - c), and the row saw a key at all (lse > -inf).
      const int64_t diag64 = i0 + 1 + a.S - a.T - j0;
      const int diag = !a.causal ? kTile + 1 : diag64 > kTile + 1 ? kTile + 1 : diag64 < -BQ ? -BQ : int(diag64);
      const int64_t krmax = a.S - j0;  // keys kr >= krmax are past S (zero rows)
      auto sees = [&](int r, int c) { return kr[r] < krmax && kr[r] - c < diag && Ls[c] != kNegInf; };

      // S^T = K Q^T: 16 keys x BQ queries per warp; n-block n is queries 8n .. 8n+7.
      float st[BQ / 8][4];
#pragma unroll
      for (int n = 0; n < BQ / 8; ++n) st[n][0] = st[n][1] = st[n][2] = st[n][3] = 0.f;
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {  // d = 16 kk .. +15
        uint32_t ka[4];
        load_a(ka, Ks, LD, warp * 16, kk * 16, lane);
        mma_times_nk<kBF16, BQ>(st, ka, Qs, LD, kk * 16, lane);  // n-block n: queries 8n ..; Qs is [n][k]
      }
      // P^T in place: element e of n-block n is key kr[e / 2], query c = 8n + 2t + e % 2.
#pragma unroll
      for (int n = 0; n < BQ / 8; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int c = n * 8 + 2 * t + e % 2;
          const float x = st[n][e] * a.scale;
          if constexpr (kBias)
            st[n][e] = sees(e / 2, c) ? __expf(x + bias_at<kBF16>(a, i0 + c, j0 + kr[e / 2]) - Ls[c]) : 0.f;
          else st[n][e] = sees(e / 2, c) ? __expf(x - Ls[c]) : 0.f;
        }
      }

      // dV += P^T dO: k = the chunk's queries, 16 at a time (n-blocks 2kc, 2kc+1 of P^T).
#pragma unroll
      for (int kc = 0; kc < BQ / 16; ++kc) {
        uint32_t pa[4];
        acc_to_a<kBF16>(pa, st[2 * kc], st[2 * kc + 1]);
        mma_times_kn<kBF16, D>(dv, pa, Gs, LD, kc * 16, lane);  // Gs is [k][n]
      }

      // dP^T = V dO^T, dS^T = P^T (dP^T - delta) and dK += dS^T Q, 16 queries (n-blocks 2kc and
      // 2kc + 1, the k range of one dK product) at a time: only 8 dP^T floats are live.
#pragma unroll
      for (int kc = 0; kc < BQ / 16; ++kc) {
        float dpt[2][4] = {};
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {  // dv = 16 kk .. +15
          uint32_t va[4], gb[4];
          load_a(va, Vs, LD, warp * 16, kk * 16, lane);
          load_b_nk(gb, Gs, LD, kc * 16, kk * 16, lane);  // Gs is [n][k] here: queries x dv
          mma_16816<kBF16>(dpt[0], va, gb[0], gb[1]);
          mma_16816<kBF16>(dpt[1], va, gb[2], gb[3]);
        }
        // dS^T (0 where masked, whatever dP^T holds).
#pragma unroll
        for (int h2 = 0; h2 < 2; ++h2)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int n = 2 * kc + h2, c = n * 8 + 2 * t + e % 2;
            dpt[h2][e] = sees(e / 2, c) ? st[n][e] * (dpt[h2][e] - Ds[c]) : 0.f;
          }
        uint32_t sa[4];
        acc_to_a<kBF16>(sa, dpt[0], dpt[1]);
        mma_times_kn<kBF16, D>(dk, sa, Qs, LD, kc * 16, lane);  // Qs is [k][n]
      }
    }
  }

  // Every key row of the tile below S is written (0 where no query sees it).
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int64_t j = j0 + kr[r];
    if (j >= a.S) continue;
    const int64_t row = bhk * a.S + j;
    uint16_t* dkrow = a.dk + row * D;
    uint16_t* dvrow = a.dv + row * D;
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      *reinterpret_cast<uint32_t*>(dkrow + n * 8 + 2 * t) =
          H16::pack(dk[n][2 * r] * a.scale, dk[n][2 * r + 1] * a.scale);
      *reinterpret_cast<uint32_t*>(dvrow + n * 8 + 2 * t) = H16::pack(dv[n][2 * r], dv[n][2 * r + 1]);
    }
  }
}

// The query rows of one lane in the dq and dbias kernels (accumulator rows g and g + 8 of its
// warp's 16): lse, delta, and the keys they see, [0, vis) (none past T or when the row saw no key).
struct LaneRows {
  int64_t rows[2], vis[2];
  float lse[2], delta[2];
};
__device__ __forceinline__ LaneRows lane_rows(const BackwardArgs& a, int64_t bh, int64_t i0, int warp, int lane) {
  LaneRows l;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l.rows[r] = i0 + warp * 16 + lane / 4 + 8 * r;
    const bool ok = l.rows[r] < a.T;
    l.lse[r] = ok ? a.lse[bh * a.T + l.rows[r]] : -CUDART_INF_F;
    l.delta[r] = ok ? a.delta[bh * a.T + l.rows[r]] : 0.f;
    l.vis[r] = ok && l.lse[r] != -CUDART_INF_F ? visible(a, l.rows[r]) : 0;
  }
  return l;
}

// dS = P (dP - delta) of the warp's 16 query rows against the 64 keys j0 .. of the shared tiles
// (Qs, Gs: the rows' q and dO from row 0 of the block's tile; Ks, Vs: the keys), with S = Q K^T,
// P = exp(scale S + bias - lse) and dP = dO V^T; n-block n is keys 8n .. 8n+7, element e of it
// row l.rows[e / 2] and key j0 + 8n + 2t + e % 2, 0 where the row does not see the key.
template <int D, bool kBF16>
__device__ __forceinline__ void warp_ds(float (&s)[kTile / 8][4], const BackwardArgs& a, const uint16_t* Qs,
                                        const uint16_t* Gs, const uint16_t* Ks, const uint16_t* Vs, int64_t j0,
                                        const LaneRows& l) {
  constexpr int LD = D + kPad;
  const int warp = int(threadIdx.x) / kWarp, lane = int(threadIdx.x) % kWarp, t = lane % 4;
  float dp[kTile / 8][4];
#pragma unroll
  for (int n = 0; n < kTile / 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) s[n][e] = dp[n][e] = 0.f;
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    uint32_t qa[4], ga[4];
    load_a(qa, Qs, LD, warp * 16, kk * 16, lane);
    load_a(ga, Gs, LD, warp * 16, kk * 16, lane);
    mma_times_nk<kBF16, kTile>(s, qa, Ks, LD, kk * 16, lane);   // S = Q K^T (keys as columns)
    mma_times_nk<kBF16, kTile>(dp, ga, Vs, LD, kk * 16, lane);  // dP = dO V^T
  }
#pragma unroll
  for (int n = 0; n < kTile / 8; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int r = e / 2;
      const int64_t j = j0 + n * 8 + 2 * t + e % 2;
      s[n][e] = j < l.vis[r]
                    ? __expf(s[n][e] * a.scale + bias_at<kBF16>(a, l.rows[r], j) - l.lse[r]) * (dp[n][e] - l.delta[r])
                    : 0.f;
    }
  }
}

// The dq and dbias kernels' shared tiles, [kTile][D + kPad] each: query rows (q), their dO rows
// (g), keys (k) and values (v: the keys' tile when K and V are one tensor).
template <int D> struct QueryTileSmem {
  uint16_t *q, *g, *k, *v;
  __device__ QueryTileSmem(unsigned char* raw, bool kv_shared) {
    q = reinterpret_cast<uint16_t*>(raw);
    g = q + kTile * (D + kPad);
    k = g + kTile * (D + kPad);
    v = kv_shared ? k : k + kTile * (D + kPad);
  }
};

// One block per (b, h, 64-query tile): dq = scale * sum_j dS_ij k_j over the visible key tiles.
template <int D, bool kBF16> __global__ void __launch_bounds__(kThreads, kDqBlocks<D>) flash_dq_kernel(BackwardArgs a) {
  using H16 = Half16<kBF16>;
  constexpr int LD = D + kPad;
  QKV_DYNAMIC_SHARED(unsigned char, smem_raw);
  const QueryTileSmem<D> sm(smem_raw, a.kv_shared);
  uint16_t *Qs = sm.q, *Gs = sm.g, *Ks = sm.k, *Vs = sm.v;

  const int warp = int(threadIdx.x) / kWarp, lane = int(threadIdx.x) % kWarp, t = lane % 4;
  const int64_t bh = blockIdx.x, b = bh / a.H, h = bh % a.H, hk = h / a.group;
  const int64_t i0 = int64_t(blockIdx.y) * kTile;
  load_tile<D>(Qs, a.q, a.qs, b, h, i0, a.T, a.vector_loads);
  load_tile<D>(Gs, a.g, a.gs, b, h, i0, a.T, a.vector_loads);
  const LaneRows l = lane_rows(a, bh, i0, warp, lane);
  float dq[D / 8][4];  // n-block n: columns 8n + 2t, +1 of rows g (0, 1) and g + 8 (2, 3)
#pragma unroll
  for (int n = 0; n < D / 8; ++n) dq[n][0] = dq[n][1] = dq[n][2] = dq[n][3] = 0.f;

  const int64_t last_row = (i0 + kTile < a.T ? i0 + kTile : a.T) - 1;
  const int64_t kend = visible(a, last_row);  // no row of the block sees a key past this
#pragma unroll 1
  for (int64_t j0 = 0; j0 < kend; j0 += kTile) {
    __syncthreads();  // the previous tile's readers are done (the first time: Q, dO loaded)
    load_tile<D>(Ks, a.k, a.ks, b, hk, j0, a.S, a.vector_loads);
    if (!a.kv_shared) load_tile<D>(Vs, a.v, a.vs, b, hk, j0, a.S, a.vector_loads);
    __syncthreads();
    float s[kTile / 8][4];
    warp_ds<D, kBF16>(s, a, Qs, Gs, Ks, Vs, j0, l);
    // dQ += dS K: k = the tile's keys, 16 at a time.
#pragma unroll
    for (int kc = 0; kc < kTile / 16; ++kc) {
      uint32_t sa[4];
      acc_to_a<kBF16>(sa, s[2 * kc], s[2 * kc + 1]);
      mma_times_kn<kBF16, D>(dq, sa, Ks, LD, kc * 16, lane);  // Ks is [k][n]
    }
  }

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (l.rows[r] >= a.T) continue;
    uint16_t* dqrow = a.dq + (bh * a.T + l.rows[r]) * D;
#pragma unroll
    for (int n = 0; n < D / 8; ++n)
      *reinterpret_cast<uint32_t*>(dqrow + n * 8 + 2 * t) =
          H16::pack(dq[n][2 * r] * a.scale, dq[n][2 * r + 1] * a.scale);
  }
}

// One block per (b, 64-query tile, 64-key tile): dbias_partial[b] = sum over the heads h, in
// order, of dS [T, S] for the tile (0 where no row sees a key); every element in range written.
template <int D, bool kBF16>
__global__ void __launch_bounds__(kThreads, kDqBlocks<D>) flash_dbias_kernel(BackwardArgs a) {
  QKV_DYNAMIC_SHARED(unsigned char, smem_raw);
  const QueryTileSmem<D> sm(smem_raw, a.kv_shared);
  uint16_t *Qs = sm.q, *Gs = sm.g, *Ks = sm.k, *Vs = sm.v;

  const int warp = int(threadIdx.x) / kWarp, lane = int(threadIdx.x) % kWarp, t = lane % 4;
  const int64_t b = blockIdx.x, i0 = int64_t(blockIdx.y) * kTile, j0 = int64_t(blockIdx.z) * kTile;
  float acc[kTile / 8][4];
#pragma unroll
  for (int n = 0; n < kTile / 8; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.f;

  const int64_t last_row = (i0 + kTile < a.T ? i0 + kTile : a.T) - 1;
  const int64_t heads = visible(a, last_row) > j0 ? a.H : 0;  // block-uniform: a tile no row sees is 0
#pragma unroll 1
  for (int64_t h = 0; h < heads; ++h) {
    const int64_t hk = h / a.group;
    __syncthreads();  // the previous head's readers are done
    load_tile<D>(Qs, a.q, a.qs, b, h, i0, a.T, a.vector_loads);
    load_tile<D>(Gs, a.g, a.gs, b, h, i0, a.T, a.vector_loads);
    if (h % a.group == 0) {  // the first query head of KV head hk
      load_tile<D>(Ks, a.k, a.ks, b, hk, j0, a.S, a.vector_loads);
      if (!a.kv_shared) load_tile<D>(Vs, a.v, a.vs, b, hk, j0, a.S, a.vector_loads);
    }
    __syncthreads();
    const LaneRows l = lane_rows(a, b * a.H + h, i0, warp, lane);
    float s[kTile / 8][4];
    warp_ds<D, kBF16>(s, a, Qs, Gs, Ks, Vs, j0, l);
#pragma unroll
    for (int n = 0; n < kTile / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[n][e] += s[n][e];
  }

  const int64_t rows[2] = {i0 + warp * 16 + lane / 4, i0 + warp * 16 + lane / 4 + 8};
  float* out = a.dbias_partial + b * int64_t(a.T) * a.S;
#pragma unroll
  for (int n = 0; n < kTile / 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int64_t i = rows[e / 2], j = j0 + n * 8 + 2 * t + e % 2;
      if (i < a.T && j < a.S) out[i * a.S + j] = acc[n][e];
    }
}

size_t dkdv_smem(int D, int BQ, bool kv_shared) {
  return size_t((kv_shared ? 1 : 2) * kTile + 2 * BQ) * (D + kPad) * sizeof(uint16_t) + 2 * size_t(BQ) * sizeof(float);
}
size_t dq_smem(int D, bool kv_shared) { return size_t(kv_shared ? 3 : 4) * kTile * (D + kPad) * sizeof(uint16_t); }

// The kernel as a template argument: each launch site is an instantiation of its own (so the
// emulated device's coverage record names the kernel, cuda_emu/launch.h).
template <auto kKernel> void launch_tiles(dim3 grid, size_t smem, const BackwardArgs& a) {
  if (smem > 48 * 1024)
    QKV_CUDA_CHECK(cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  QKV_LAUNCH(grid, kThreads, smem, launch_stream(), kKernel)(a);
  QKV_CUDA_LAUNCH_CHECK();
}

int64_t ceil_div(int64_t n, int64_t d) { return (n + d - 1) / d; }

template <int D, bool kBF16> void delta(const BackwardArgs& a, int64_t rows) {
  QKV_LAUNCH(blocks_for(rows * kWarp, kDeltaThreads), kDeltaThreads, 0, launch_stream(), flash_delta_kernel<D, kBF16>)
  (a, rows);
  QKV_CUDA_LAUNCH_CHECK();
}

template <int D, bool kBF16> void dq(const BackwardArgs& a) {
  launch_tiles<flash_dq_kernel<D, kBF16>>(dim3(unsigned(a.B * a.H), unsigned(ceil_div(a.T, kTile))),
                                          dq_smem(D, a.kv_shared), a);
}

template <int D, bool kBF16> void dkdv(const BackwardArgs& a) {
  const dim3 grid(unsigned(a.B * a.Hk), unsigned(ceil_div(a.S, kTile)));
  const size_t smem = dkdv_smem(D, kQueryChunk<D>, a.kv_shared);
  if (a.bias) launch_tiles<flash_dkdv_kernel<D, kBF16, true>>(grid, smem, a);
  else launch_tiles<flash_dkdv_kernel<D, kBF16, false>>(grid, smem, a);
}

template <int D, bool kBF16> void dbias(const BackwardArgs& a) {
  launch_tiles<flash_dbias_kernel<D, kBF16>>(dim3(unsigned(a.B), unsigned(ceil_div(a.T, kTile)),
                                                  unsigned(ceil_div(a.S, kTile))),
                                             dq_smem(D, a.kv_shared), a);
}

// delta, then dq and dk/dv (the Hopper kernels where `hopper`), then dS summed over the heads.
template <int D, bool kBF16>
void run(const BackwardArgs& a, bool hopper, const Tensor& g, const Tensor& q, const Tensor& k, const Tensor& v) {
  const int64_t rows = a.B * a.H * a.T;
  if (rows > 0) delta<D, kBF16>(a, rows);
  if (hopper) {
    hopper_attention_dq(g, q, k, v, a);
    hopper_attention_dkdv(g, q, k, v, a);
  } else {
    if (rows > 0) dq<D, kBF16>(a);
    if (a.B * a.Hk * a.S > 0) dkdv<D, kBF16>(a);  // every key row is written, 0 where no query sees it
  }
  if (a.dbias_partial && a.B * a.T * a.S > 0) dbias<D, kBF16>(a);
}

void strides(int64_t (&dst)[3], const Tensor& t) {
  for (int d = 0; d < 3; ++d) dst[d] = t.stride(d);
}

}  // namespace

bool flash_attention_backward_supports(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& bias) {
  return flash_attention_supports(q, k, v) &&
         (!bias.defined() || (bias.dtype() == q.dtype() && bias.is_contiguous() && bias.dim() == 2 &&
                              bias.size(0) == q.size(2) && bias.size(1) == k.size(2) && bias.size(0) <= 65535 * kTile));
}

void flash_attention_backward(const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v,
                              const Tensor& bias, const Tensor& out, const Tensor& lse, const AttentionAttrs& attrs,
                              const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dbias) {
  const char* op = "attention_backward";
  check<ValueError>(grad_out.stride(3) == 1 && out.stride(3) == 1 && lse.dtype() == DType::f32 && lse.is_contiguous() &&
                        dq.is_contiguous() && dk.is_contiguous() && dv.is_contiguous() &&
                        bias.defined() == dbias.defined(),
                    op,
                    ": the tensor-core backward needs grad and out rows with a contiguous last dim, a float32 "
                    "contiguous lse, contiguous gradients, and dbias exactly with a bias");
  BackwardArgs a;
  a.q = bits(q);
  a.k = bits(k);
  a.v = bits(v);
  a.g = bits(grad_out);
  a.o = bits(out);
  strides(a.qs, q);
  strides(a.ks, k);
  strides(a.vs, v);
  strides(a.gs, grad_out);
  strides(a.os, out);
  a.lse = lse.data<float>();
  a.dq = static_cast<uint16_t*>(dq.raw_data());
  a.dk = static_cast<uint16_t*>(dk.raw_data());
  a.dv = static_cast<uint16_t*>(dv.raw_data());
  const int64_t B = q.size(0), H = q.size(1), Hk = k.size(1), T = q.size(2), S = k.size(2);
  if (B * H * T == 0 && B * Hk * S == 0) {
    if (dbias.defined()) raw::fill(dbias, 0);  // the sum of nothing
    return;
  }
  check<ValueError>(B * H <= int64_t(INT32_MAX) && ceil_div(T, kTile) <= 65535 && ceil_div(S, kTile) <= 65535, op,
                    ": too many heads or tiles for one launch (", B * H, " heads, ", T, " queries, ", S, " keys)");
  a.B = B;
  a.H = H;
  a.Hk = Hk;
  a.T = int(T);
  a.S = int(S);
  a.group = int(H / Hk);
  a.scale = float(attrs.scale);
  a.causal = attrs.causal;
  a.kv_shared = same_view(k, v);
  a.vector_loads = aligned16(q) && aligned16(k) && aligned16(v) && aligned16(grad_out);
  const int64_t rows = B * H * T;
  set_device(q);
  Tensor delta;
  if (rows > 0) {
    delta = empty({rows}, {DType::f32, q.device()});
    a.delta = delta.data<float>();
  }
  // With a bias: dS summed over the heads into partial [B, T, S] float32, then over b.
  Tensor partial;
  if (bias.defined()) {
    a.bias = bits(bias);
    partial = empty({B, T, S}, {DType::f32, q.device()});
    a.dbias_partial = partial.data<float>();
    check<ValueError>(B <= 65535, op, ": too many batch rows for the dbias launch (", B, ")");
  }
  const bool bf = q.dtype() == DType::bf16;
  const bool hopper = hopper_attention_supports(q, k, v) && hopper::mappable(grad_out);
  if (q.size(3) == 64) bf ? run<64, true>(a, hopper, grad_out, q, k, v) : run<64, false>(a, hopper, grad_out, q, k, v);
  else bf ? run<128, true>(a, hopper, grad_out, q, k, v) : run<128, false>(a, hopper, grad_out, q, k, v);
  if (bias.defined()) {
    const Tensor in[] = {partial};
    Tensor dbias32[] = {empty({T, S}, {DType::f32, q.device()})};
    sum(KernelArgs{in, dbias32, ReduceAttrs{{0}, false}});  // the fixed-order column reduction
    raw::copy(dbias, dbias32[0]);                           // rounded to the bias's dtype
  }
}

}  // namespace qkv::kernels::cuda
