// Fused scaled-dot-product attention on CUDA, with exactly the semantics of
// kernels/cpu/attention.cpp: GQA (query head h reads KV head h / (H / Hk)), bottom-right causal
// masking, an optional additive [T, S] bias, the per-row log-sum-exp saved for the backward, and
// K and V as one tensor (read once) when they are the same tensor. The [T, S] score matrix is
// never materialized: FlashAttention-2 style tiles with an online softmax, accumulated in F
// (float or double).
//
// Every kernel runs W warps (W in {8, 4, 2, 1}: the largest whose dynamic shared memory fits the
// device) and uses one of two thread mappings (kernels/cuda/attention/attention_tiles.cuh):
//   rows x key lanes   (forward, dq, dbias): each warp owns 4 query rows of a 4W-row tile; lane j
//                      is key j of a 32-key tile when scoring; scores are broadcast by shuffles
//                      and lane c then owns output columns c, c + 32, ... (up to 256).
//   keys x query lanes (dk, dv): each warp owns 4 keys of a 4W-key tile; lane i is query row i
//                      of a 32-row tile when scoring, then lane c owns columns as above.
// The tile a warp reads with its lanes (one row per lane) is stored with a padded row stride
// (cols + 1) to spread shared-memory banks; the tile it reads by broadcast is not padded.
//
// Backward (no atomics, so the same bits every run): delta_i = <dO_i, O_i> (one warp per row);
// dq: one block per (b, h, query tile), looping over key tiles; dk and dv: one block per (b, KV
// head, key tile), looping over the group's query heads and their query tiles; dbias: one block
// per (query tile, key tile) of [T, S], summing dS over (b, h) in a fixed order. Each gradient
// element is accumulated in one thread's registers and written once.
//
// bf16 and f16 forwards run on the tensor cores when the head dim is 64 or 128 (on a Hopper
// device the wgmma kernels of hopper/forward.cu, elsewhere the mma.sync ones of
// flash_attention.cu), and through these kernels on float32 copies otherwise; so do their backwards
// (flash_attention_backward.cu, with D = Dv of 64 or 128, dbias included). A decode step (a
// few query rows, a long cache, no bias) goes to the split-KV kernel (decode_attention.cu) in any
// of float32, bf16 and f16.
#include <algorithm>
#include <cstdint>

#include "kernels/cuda/attention/attention_tiles.cuh"
#include "kernels/cuda/attention/decode_attention.h"
#include "kernels/cuda/attention/flash_attention.h"
#include "kernels/cuda/attention/flash_attention_backward.h"
#include "kernels/cuda/attention/hopper/hopper_attention.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/layout.h"
#include "tensor/view.h"

namespace qkv::kernels::cuda {
namespace {

using namespace attention_tiles;

// ---- forward ------------------------------------------------------------------------------------

// One block per (b, h, query tile): out [B, H, T, Dv] and lse [B, H, T], contiguous.
template <class F> __global__ void __launch_bounds__(kMaxThreads) attention_forward_kernel(Attn<F> a, F* out, F* lse) {
  QKV_DYNAMIC_SHARED(unsigned char, smem_bytes);
  F* smem = reinterpret_cast<F*>(smem_bytes);
  const int W = int(blockDim.x) / kWarp, warp = int(threadIdx.x) / kWarp, lane = int(threadIdx.x) % kWarp;
  const Layout L = layout(Pass::forward, W, a.D, a.Dv, a.kv_shared);
  F *Qs = smem + L.q, *Ks = smem + L.k, *Vs = smem + L.v;
  const int BQ = kRowsPerWarp * W;
  const int64_t qtiles = (a.T + BQ - 1) / BQ, bh = blockIdx.x / qtiles, b = bh / a.H, h = bh % a.H;
  const int64_t hk = h / a.group, i0 = (blockIdx.x % qtiles) * BQ;
  const int ni = int(min(int64_t(BQ), a.T - i0));
  load_rows(Qs, L.ldq, a.q, b, h, i0, ni, a.D);

  F m_run[kRowsPerWarp], l_run[kRowsPerWarp], acc[kRowsPerWarp][kSlots];
#pragma unroll
  for (int m = 0; m < kRowsPerWarp; ++m) {
    m_run[m] = neg_infinity<F>();
    l_run[m] = F(0);
#pragma unroll
    for (int s = 0; s < kSlots; ++s) acc[m][s] = F(0);
  }

  const int64_t kend = a.visible(i0 + ni - 1);  // no row of the tile sees a key past this
  for (int64_t j0 = 0; j0 < kend; j0 += kKeyTile) {
    const int nj = int(min(int64_t(kKeyTile), kend - j0));
    __syncthreads();  // the previous tile's readers are done
    load_rows(Ks, L.ldk, a.k, b, hk, j0, nj, a.D);
    if (!a.kv_shared) load_rows(Vs, L.ldv, a.v, b, hk, j0, nj, a.Dv);
    __syncthreads();
#pragma unroll
    for (int m = 0; m < kRowsPerWarp; ++m) {
      const int r = warp + W * m;
      if (r >= ni) continue;  // warp-uniform
      const int64_t i = i0 + r;
      const int vis = keys_in_tile(a.visible(i), j0, nj);
      F s = neg_infinity<F>();
      if (lane < vis) s = a.score(Qs + r * L.ldq, Ks + lane * L.ldk, i, j0 + lane);
      const F m_new = MaxOp{}(warp_reduce(s, MaxOp{}), m_run[m]);
      // Nothing visible to this row yet: leave its state as it is. No branch around the
      // shuffles, so that the warp stays converged whatever the values (NaN included).
      const bool none = m_new == neg_infinity<F>();
      const F corr = none ? F(1) : exp_(m_run[m] - m_new);
      const F p = none ? F(0) : exp_(s - m_new);
      l_run[m] = l_run[m] * corr + warp_reduce(p, SumOp{});
      m_run[m] = m_new;
#pragma unroll
      for (int s2 = 0; s2 < kSlots; ++s2) acc[m][s2] *= corr;
      add_weighted_rows(acc[m], p, Vs, L.ldv, vis, a.Dv, lane);
    }
  }

#pragma unroll
  for (int m = 0; m < kRowsPerWarp; ++m) {
    const int r = warp + W * m;
    if (r >= ni) continue;
    const int64_t row = bh * a.T + i0 + r;
    const bool empty = l_run[m] == F(0);  // the row sees no key: output 0, lse -inf
#pragma unroll
    for (int s = 0; s < kSlots; ++s) {
      const int c = lane + kWarp * s;
      if (c < a.Dv) out[row * a.Dv + c] = empty ? F(0) : acc[m][s] / l_run[m];
    }
    if (lane == 0) lse[row] = empty ? neg_infinity<F>() : m_run[m] + log_(l_run[m]);
  }
}

// ---- backward -----------------------------------------------------------------------------------

// delta[r] = <dO_r, O_r> for every row r of [B, H, T]: one warp per row.
template <class F>
__global__ void __launch_bounds__(kMaxThreads)
    attention_delta_kernel(HeadRows<F> g, HeadRows<F> o, int64_t H, int64_t T, int64_t rows, int Dv, F* delta) {
  const int lane = int(threadIdx.x) % kWarp;
  const int64_t first = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp;
  const int64_t step = int64_t(gridDim.x) * blockDim.x / kWarp;
  for (int64_t r = first; r < rows; r += step) {  // warp-uniform
    const int64_t b = r / (H * T), h = (r / T) % H, i = r % T;
    const F* gr = g.row(b, h, i);
    const F* orow = o.row(b, h, i);
    F s = F(0);
    for (int c = lane; c < Dv; c += kWarp) s += gr[c] * orow[c];
    s = warp_reduce(s, SumOp{});
    if (lane == 0) delta[r] = s;
  }
}

// The backward's inputs besides Attn: grad_out rows, and lse and delta as contiguous [B, H, T].
template <class F> struct Grads {
  HeadRows<F> g;
  const F* lse;
  const F* delta;
};

// One block per (b, h, query tile): dq [B, H, T, D] = scale * sum_j dS_ij k_j.
template <class F> __global__ void __launch_bounds__(kMaxThreads) attention_dq_kernel(Attn<F> a, Grads<F> gr, F* dq) {
  QKV_DYNAMIC_SHARED(unsigned char, smem_bytes);
  F* smem = reinterpret_cast<F*>(smem_bytes);
  const int W = int(blockDim.x) / kWarp, warp = int(threadIdx.x) / kWarp, lane = int(threadIdx.x) % kWarp;
  const Layout L = layout(Pass::rows, W, a.D, a.Dv, a.kv_shared);
  F *Qs = smem + L.q, *Gs = smem + L.g, *Ks = smem + L.k, *Vs = smem + L.v;
  const int BQ = kRowsPerWarp * W;
  const int64_t qtiles = (a.T + BQ - 1) / BQ, bh = blockIdx.x / qtiles, b = bh / a.H, h = bh % a.H;
  const int64_t hk = h / a.group, i0 = (blockIdx.x % qtiles) * BQ;
  const int ni = int(min(int64_t(BQ), a.T - i0));
  load_rows(Qs, L.ldq, a.q, b, h, i0, ni, a.D);
  load_rows(Gs, L.ldg, gr.g, b, h, i0, ni, a.Dv);

  F lse[kRowsPerWarp], delta[kRowsPerWarp], acc[kRowsPerWarp][kSlots];
#pragma unroll
  for (int m = 0; m < kRowsPerWarp; ++m) {
    const int r = warp + W * m;
    lse[m] = r < ni ? gr.lse[bh * a.T + i0 + r] : neg_infinity<F>();
    delta[m] = r < ni ? gr.delta[bh * a.T + i0 + r] : F(0);
#pragma unroll
    for (int s = 0; s < kSlots; ++s) acc[m][s] = F(0);
  }

  const int64_t kend = a.visible(i0 + ni - 1);
  for (int64_t j0 = 0; j0 < kend; j0 += kKeyTile) {
    const int nj = int(min(int64_t(kKeyTile), kend - j0));
    __syncthreads();
    load_rows(Ks, L.ldk, a.k, b, hk, j0, nj, a.D);
    if (!a.kv_shared) load_rows(Vs, L.ldv, a.v, b, hk, j0, nj, a.Dv);
    __syncthreads();
#pragma unroll
    for (int m = 0; m < kRowsPerWarp; ++m) {
      const int r = warp + W * m;
      if (r >= ni || lse[m] == neg_infinity<F>()) continue;  // warp-uniform; such a row adds nothing
      const int64_t i = i0 + r;
      const int vis = keys_in_tile(a.visible(i), j0, nj);
      F ds = F(0);
      if (lane < vis) {
        const F p = exp_(a.score(Qs + r * L.ldq, Ks + lane * L.ldk, i, j0 + lane) - lse[m]);
        ds = p * (dot(Gs + r * L.ldg, Vs + lane * L.ldv, a.Dv) - delta[m]);
      }
      add_weighted_rows(acc[m], ds, Ks, L.ldk, vis, a.D, lane);
    }
  }

#pragma unroll
  for (int m = 0; m < kRowsPerWarp; ++m) {
    const int r = warp + W * m;
    if (r >= ni) continue;
    store_scaled(dq + (bh * a.T + i0 + r) * a.D, acc[m], a.scale, a.D, lane);
  }
}

// One block per (b, KV head, key tile): dk [B, Hk, S, D] = scale * sum dS_ij q_i and
// dv [B, Hk, S, Dv] = sum P_ij dO_i, over the group's query heads and all their query rows.
template <class F>
__global__ void __launch_bounds__(kMaxThreads) attention_dkdv_kernel(Attn<F> a, Grads<F> gr, F* dk, F* dv) {
  QKV_DYNAMIC_SHARED(unsigned char, smem_bytes);
  F* smem = reinterpret_cast<F*>(smem_bytes);
  const int W = int(blockDim.x) / kWarp, warp = int(threadIdx.x) / kWarp, lane = int(threadIdx.x) % kWarp;
  const Layout L = layout(Pass::keys, W, a.D, a.Dv, a.kv_shared);
  F *Qs = smem + L.q, *Gs = smem + L.g, *Ks = smem + L.k, *Vs = smem + L.v;
  const int BK = kRowsPerWarp * W;
  const int64_t ktiles = (a.S + BK - 1) / BK, bhk = blockIdx.x / ktiles, b = bhk / a.Hk, hk = bhk % a.Hk;
  const int64_t j0 = (blockIdx.x % ktiles) * BK;
  const int nj = int(min(int64_t(BK), a.S - j0));
  load_rows(Ks, L.ldk, a.k, b, hk, j0, nj, a.D);  // read once, for both roles when K = V
  if (!a.kv_shared) load_rows(Vs, L.ldv, a.v, b, hk, j0, nj, a.Dv);

  F dka[kRowsPerWarp][kSlots], dva[kRowsPerWarp][kSlots];
#pragma unroll
  for (int m = 0; m < kRowsPerWarp; ++m)
#pragma unroll
    for (int s = 0; s < kSlots; ++s) dka[m][s] = dva[m][s] = F(0);

  for (int64_t h = hk * a.group; h < (hk + 1) * a.group; ++h) {
    const int64_t bh = b * a.H + h;
    for (int64_t i0 = 0; i0 < a.T; i0 += kWarp) {
      const int ni = int(min(int64_t(kWarp), a.T - i0));
      if (a.visible(i0 + ni - 1) <= j0) continue;  // block-uniform: no row here sees our keys
      // The previous query tile's readers are done (and K, V are loaded).
      __syncthreads();
      load_rows(Qs, L.ldq, a.q, b, h, i0, ni, a.D);
      load_rows(Gs, L.ldg, gr.g, b, h, i0, ni, a.Dv);
      __syncthreads();
      // Lane `lane` scores query row i0 + lane against each key of the warp.
      const bool row_ok = lane < ni;
      const int64_t i = i0 + lane;
      const F lse = row_ok ? gr.lse[bh * a.T + i] : neg_infinity<F>();
      const F delta = row_ok ? gr.delta[bh * a.T + i] : F(0);
      const int64_t vis_end = row_ok && lse != neg_infinity<F>() ? a.visible(i) : 0;
#pragma unroll
      for (int m = 0; m < kRowsPerWarp; ++m) {
        const int kr = warp + W * m;
        if (kr >= nj) continue;  // warp-uniform
        const int64_t j = j0 + kr;
        F p = F(0), ds = F(0);
        if (j < vis_end) {
          p = exp_(a.score(Qs + lane * L.ldq, Ks + kr * L.ldk, i, j) - lse);
          ds = p * (dot(Gs + lane * L.ldg, Vs + kr * L.ldv, a.Dv) - delta);
        }
        for (int ii = 0; ii < ni; ++ii) {
          const F pi = __shfl_sync(kFullMask, p, ii);
          const F dsi = __shfl_sync(kFullMask, ds, ii);
          const F* qrow = Qs + ii * L.ldq;
          const F* grow = Gs + ii * L.ldg;
#pragma unroll
          for (int s = 0; s < kSlots; ++s) {
            const int c = lane + kWarp * s;
            if (c < a.Dv) dva[m][s] += pi * grow[c];
            if (c < a.D) dka[m][s] += dsi * qrow[c];
          }
        }
      }
    }
  }

#pragma unroll
  for (int m = 0; m < kRowsPerWarp; ++m) {
    const int kr = warp + W * m;
    if (kr >= nj) continue;
    const int64_t row = bhk * a.S + j0 + kr;
    store_scaled(dk + row * a.D, dka[m], a.scale, a.D, lane);
    store_scaled(dv + row * a.Dv, dva[m], F(1), a.Dv, lane);
  }
}

// One block per (query tile, key tile) of dbias [T, S]: the sum of dS_ij over b, then h.
template <class F>
__global__ void __launch_bounds__(kMaxThreads) attention_dbias_kernel(Attn<F> a, Grads<F> gr, F* dbias) {
  QKV_DYNAMIC_SHARED(unsigned char, smem_bytes);
  F* smem = reinterpret_cast<F*>(smem_bytes);
  const int W = int(blockDim.x) / kWarp, warp = int(threadIdx.x) / kWarp, lane = int(threadIdx.x) % kWarp;
  const Layout L = layout(Pass::rows, W, a.D, a.Dv, a.kv_shared);
  F *Qs = smem + L.q, *Gs = smem + L.g, *Ks = smem + L.k, *Vs = smem + L.v;
  const int BQ = kRowsPerWarp * W;
  const int64_t ktiles = (a.S + kKeyTile - 1) / kKeyTile;
  const int64_t i0 = (blockIdx.x / ktiles) * BQ, j0 = (blockIdx.x % ktiles) * kKeyTile;
  const int ni = int(min(int64_t(BQ), a.T - i0)), nj = int(min(int64_t(kKeyTile), a.S - j0));

  F acc[kRowsPerWarp];
#pragma unroll
  for (int m = 0; m < kRowsPerWarp; ++m) acc[m] = F(0);

  // A tile no row of which sees a key of ours stays 0 (block-uniform test).
  const int64_t groups = a.visible(i0 + ni - 1) > j0 ? a.B * a.H : 0;
  for (int64_t bh = 0; bh < groups; ++bh) {
    const int64_t b = bh / a.H, h = bh % a.H, hk = h / a.group;
    __syncthreads();  // the previous (b, h)'s readers are done
    load_rows(Qs, L.ldq, a.q, b, h, i0, ni, a.D);
    load_rows(Gs, L.ldg, gr.g, b, h, i0, ni, a.Dv);
    load_rows(Ks, L.ldk, a.k, b, hk, j0, nj, a.D);
    if (!a.kv_shared) load_rows(Vs, L.ldv, a.v, b, hk, j0, nj, a.Dv);
    __syncthreads();
#pragma unroll
    for (int m = 0; m < kRowsPerWarp; ++m) {
      const int r = warp + W * m;
      if (r >= ni) continue;
      const int64_t i = i0 + r;
      const F lse = gr.lse[bh * a.T + i];
      if (lse == neg_infinity<F>()) continue;  // warp-uniform; the row saw no key
      if (lane < keys_in_tile(a.visible(i), j0, nj)) {
        const F p = exp_(a.score(Qs + r * L.ldq, Ks + lane * L.ldk, i, j0 + lane) - lse);
        acc[m] += p * (dot(Gs + r * L.ldg, Vs + lane * L.ldv, a.Dv) - gr.delta[bh * a.T + i]);
      }
    }
  }

#pragma unroll
  for (int m = 0; m < kRowsPerWarp; ++m) {
    const int r = warp + W * m;
    if (r < ni && lane < nj) dbias[(i0 + r) * a.S + j0 + lane] = acc[m];
  }
}

// ---- host side ----------------------------------------------------------------------------------

// q, k, v (and bias) as the kernels read them; k and v alias when they are one tensor.
struct Operands {
  Tensor q, k, v, bias;
  bool kv_shared = false;
};

Tensor last_dim_contiguous(const Tensor& t) { return t.stride(-1) == 1 ? t : raw::contiguous(t); }

Operands operands(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& bias) {
  Operands o;
  o.kv_shared = same_view(k, v);
  o.q = last_dim_contiguous(q);
  o.k = last_dim_contiguous(k);
  o.v = o.kv_shared ? o.k : last_dim_contiguous(v);
  if (bias.defined()) o.bias = raw::contiguous(bias);
  return o;
}

template <class F> HeadRows<F> head_rows(const Tensor& t) {
  return {t.data<F>(), t.stride(0), t.stride(1), t.stride(2)};
}

template <class F> Attn<F> make_attn(const Operands& o, const AttentionAttrs& at, const char* op) {
  Attn<F> a;
  a.q = head_rows<F>(o.q);
  a.k = head_rows<F>(o.k);
  a.v = head_rows<F>(o.v);
  a.bias = o.bias.defined() ? o.bias.data<F>() : nullptr;
  a.B = o.q.size(0);
  a.H = o.q.size(1);
  a.Hk = o.k.size(1);
  a.T = o.q.size(2);
  a.S = o.k.size(2);
  check<ValueError>(o.q.size(3) <= kMaxDim && o.v.size(3) <= kMaxDim, op, ": the CUDA kernel supports head dims up to ",
                    kMaxDim, ", got ", o.q.size(3), " (q, k) and ", o.v.size(3), " (v)");
  a.D = int(o.q.size(3));
  a.Dv = int(o.v.size(3));
  a.group = a.H / a.Hk;
  a.scale = F(at.scale);
  a.causal = at.causal;
  a.kv_shared = o.kv_shared;
  return a;
}

// The launch shape of one kernel: the most warps whose shared memory fits the device.
struct Launch {
  int warps = 0;
  size_t smem = 0;
};

template <class F> Launch pick_launch(Pass pass, const Attn<F>& a, const char* op) {
  int device = 0, limit = 0;
  QKV_CUDA_CHECK(cudaGetDevice(&device));
  QKV_CUDA_CHECK(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  for (int w = kMaxThreads / kWarp; w >= 1; w /= 2) {
    const size_t bytes = size_t(layout(pass, w, a.D, a.Dv, a.kv_shared).total) * sizeof(F);
    if (bytes <= size_t(limit)) return {w, bytes};
  }
  throw ValueError(cat(op, ": head dims ", a.D, " and ", a.Dv, " need more shared memory than the device's ", limit,
                       " bytes per block"));
}

template <class Kernel, class... Args>
void launch(Kernel kernel, int64_t blocks, const Launch& l, const char* op, Args... args) {
  check<ValueError>(blocks <= int64_t(INT32_MAX), op, ": too many tiles for one launch (", blocks, ")");
  if (l.smem > 48 * 1024)
    QKV_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(l.smem)));
  QKV_LAUNCH(unsigned(blocks), unsigned(l.warps * kWarp), l.smem, launch_stream(), kernel)(args...);
  QKV_CUDA_LAUNCH_CHECK();
}

int64_t ceil_div(int64_t n, int64_t d) { return (n + d - 1) / d; }

void forward_float(const Operands& o, const AttentionAttrs& at, const Tensor& out, const Tensor& lse) {
  visit_float(o.q.dtype(), "attention", [&]<class F>() {
    const Attn<F> a = make_attn<F>(o, at, "attention");
    if (a.B * a.H * a.T == 0) return;
    set_device(o.q);
    const Launch l = pick_launch(Pass::forward, a, "attention");
    const int64_t blocks = a.B * a.H * ceil_div(a.T, kRowsPerWarp * l.warps);
    launch(attention_forward_kernel<F>, blocks, l, "attention", a, out.data<F>(), lse.data<F>());
  });
}

// float32 copies of 16-bit operands (K=V copied once, and still one tensor).
Operands widened(const Operands& o) {
  Operands w;
  w.q = raw::to(o.q, DType::f32, o.q.device());
  w.k = raw::to(o.k, DType::f32, o.k.device());
  w.v = o.kv_shared ? w.k : raw::to(o.v, DType::f32, o.v.device());
  if (o.bias.defined()) w.bias = raw::to(o.bias, DType::f32, o.bias.device());
  w.kv_shared = o.kv_shared;
  return w;
}

Tensor f32_like(const Tensor& t) { return empty(t.shape(), {DType::f32, t.device()}); }

// 16-bit operands the tensor-core kernel does not take (head dims other than 64 and 128): the
// float kernel on float32 copies (K=V copied once), the output rounded back.
void forward_widened(const Operands& o, const AttentionAttrs& at, const Tensor& out, const Tensor& lse) {
  const Tensor out32 = f32_like(out);
  forward_float(widened(o), at, out32, lse);
  raw::copy(out, out32);
}

// The float kernels' backward (F = float or double, the operands' dtype): grad g and out with a
// contiguous last dim, lse in any float dtype (read as F), into dq, dk, dv and, with a bias,
// dbias, all contiguous in F.
void backward_float(const Operands& o, const Tensor& g, const Tensor& out, const Tensor& lse_in,
                    const AttentionAttrs& at, const Tensor& dq, const Tensor& dk, const Tensor& dv,
                    const Tensor& dbias) {
  const char* op = "attention_backward";
  const Tensor lse = raw::contiguous(raw::to(lse_in, o.q.dtype(), o.q.device()));
  visit_float(o.q.dtype(), op, [&]<class F>() {
    const Attn<F> a = make_attn<F>(o, at, op);
    set_device(o.q);
    const int64_t rows = a.B * a.H * a.T;
    Tensor delta;
    if (rows > 0) {
      delta = empty({rows}, {o.q.dtype(), o.q.device()});
      QKV_LAUNCH(blocks_for(rows * kWarp, kMaxThreads), kMaxThreads, 0, launch_stream(), attention_delta_kernel<F>)
      (head_rows<F>(g), head_rows<F>(out), a.H, a.T, rows, a.Dv, delta.data<F>());
      QKV_CUDA_LAUNCH_CHECK();
    }
    const Grads<F> gr{head_rows<F>(g), rows > 0 ? lse.data<F>() : nullptr, rows > 0 ? delta.data<F>() : nullptr};
    if (rows > 0) {
      const Launch l = pick_launch(Pass::rows, a, op);
      const int64_t blocks = a.B * a.H * ceil_div(a.T, kRowsPerWarp * l.warps);
      launch(attention_dq_kernel<F>, blocks, l, op, a, gr, dq.data<F>());
    }
    if (a.B * a.Hk * a.S > 0) {  // every key row is written, 0 where no query sees it
      const Launch l = pick_launch(Pass::keys, a, op);
      const int64_t blocks = a.B * a.Hk * ceil_div(a.S, kRowsPerWarp * l.warps);
      launch(attention_dkdv_kernel<F>, blocks, l, op, a, gr, dk.data<F>(), dv.data<F>());
    }
    if (a.bias && a.T * a.S > 0) {
      const Launch l = pick_launch(Pass::rows, a, op);
      const int64_t blocks = ceil_div(a.T, kRowsPerWarp * l.warps) * ceil_div(a.S, kKeyTile);
      launch(attention_dbias_kernel<F>, blocks, l, op, a, gr, dbias.data<F>());
    }
  });
}

// 16-bit operands the tensor-core backward does not take (a bias, head dims other than 64 and
// 128): the float kernels on float32 copies of q, k, v (K=V once), bias, grad and out, into
// float32 gradients rounded back to the outputs' dtypes (dbias: whatever the shape rule gave).
void backward_widened(const Operands& o, const Tensor& g, const Tensor& out, const Tensor& lse,
                      const AttentionAttrs& at, const KernelArgs& k) {
  const Tensor g32 = raw::to(g, DType::f32, g.device()), out32 = raw::to(out, DType::f32, out.device());
  const Tensor dq = f32_like(k.out[0]), dk = f32_like(k.out[1]), dv = f32_like(k.out[2]);
  const Tensor dbias = o.bias.defined() ? f32_like(k.out[3]) : Tensor();
  backward_float(widened(o), g32, out32, lse, at, dq, dk, dv, dbias);
  raw::copy(k.out[0], dq);
  raw::copy(k.out[1], dk);
  raw::copy(k.out[2], dv);
  if (dbias.defined()) raw::copy(k.out[3], dbias);
}

}  // namespace

// Inputs (q [B,H,T,D], k [B,Hk,S,D], v [B,Hk,S,Dv], bias? [T,S]) -> (out [B,H,T,Dv], lse [B,H,T];
// lse is float32 for bf16/f16 inputs, which run on the tensor cores: hopper/forward.cu on a
// Hopper device, flash_attention.cu elsewhere). Decode steps run split over the keys
// (decode_attention.cu).
void attention(const KernelArgs& k) {
  const auto& at = attr<AttentionAttrs>(k.attrs, "attention");
  const Operands o = operands(k.in[0], k.in[1], k.in[2], k.in[3]);
  const DType dt = o.q.dtype();
  if (split_kv_supports(o.q, o.k, o.v, o.bias)) split_kv_attention(o.q, o.k, o.v, at, k.out[0], k.out[1]);
  else if (dt != DType::bf16 && dt != DType::f16) forward_float(o, at, k.out[0], k.out[1]);
  else if (hopper_attention_supports(o.q, o.k, o.v))
    hopper_attention_forward(o.q, o.k, o.v, o.bias, at, k.out[0], k.out[1]);
  else if (flash_attention_supports(o.q, o.k, o.v))
    flash_attention_forward(o.q, o.k, o.v, o.bias, at, k.out[0], k.out[1]);
  else forward_widened(o, at, k.out[0], k.out[1]);
}

// Inputs (grad_out, q, k, v, bias?, out, lse) -> (dq, dk, dv, dbias); dbias is written only
// with a bias. bf16/f16 inputs arrive as they are (lse float32 from the forward): the tensor-core
// backward (flash_attention_backward.cu, dbias included) at head dims 64 and 128, else the float
// kernels on float32 copies.
void attention_backward(const KernelArgs& k) {
  const char* op = "attention_backward";
  const auto& at = attr<AttentionAttrs>(k.attrs, op);
  const Operands o = operands(k.in[1], k.in[2], k.in[3], k.in[4]);
  const Tensor g = last_dim_contiguous(k.in[0]), out = last_dim_contiguous(k.in[5]), lse = k.in[6];
  const DType dt = o.q.dtype();
  if (dt != DType::bf16 && dt != DType::f16) backward_float(o, g, out, lse, at, k.out[0], k.out[1], k.out[2], k.out[3]);
  else if (g.dtype() == dt && out.dtype() == dt && flash_attention_backward_supports(o.q, o.k, o.v, o.bias))
    flash_attention_backward(g, o.q, o.k, o.v, o.bias, out, raw::contiguous(raw::to(lse, DType::f32, lse.device())), at,
                             k.out[0], k.out[1], k.out[2], o.bias.defined() ? k.out[3] : Tensor());
  else backward_widened(o, g, out, lse, at, k);
}

}  // namespace qkv::kernels::cuda
