// FlashAttention-2 forward on the tensor cores for bf16 and f16: mma.sync m16n8k16 with float32
// accumulation, fragments loaded by ldmatrix from padded shared tiles, an online softmax in
// float32 on the accumulator fragments, and P rounded to the input dtype for the P V product
// (as FlashAttention does). Semantics as kernels/cuda/attention/attention.cu: query head h reads KV head
// h / group, bottom-right causal masking, an additive [T, S] bias, a row that sees no key gives
// zeros and lse -inf, and K and V as one tensor (K=V) are loaded into shared memory once per
// tile for both products.
//
// One block of 4 warps per (b, h, 64 query rows); each warp owns 16 rows and keeps their Q
// fragments in registers. Key tiles of 64: S = Q K^T (8 n-blocks of 8 keys per warp), scale,
// bias and mask, running max and sum, O = O * corr + P V. Thread lane holds, for its rows
// g = lane / 4 and g + 8, the columns 2 (lane % 4) and +1 of every 8-wide block (the mma
// accumulator layout), so row statistics are reduced over the 4 lanes of a quad.
#include <cstdint>

#include "kernels/cuda/attention/flash_attention.h"
#include "kernels/cuda/attention/flash_mma.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/layout.h"
#include "tensor/cuda/check.h"

namespace qkv::kernels::cuda {
namespace {

using flash::aligned16;
using flash::bits;
using flash::Half16;
using flash::kAll;
using flash::kPad;
using flash::kThreads;
using flash::kTile;
using flash::ldmatrix_x4;
using flash::load_tile;
using flash::mma_16816;
using flash::visible;

struct FlashArgs {
  const uint16_t *q = nullptr, *k = nullptr, *v = nullptr, *bias = nullptr;
  int64_t qs[3] = {}, ks[3] = {}, vs[3] = {};  // element strides of batch, head and row
  uint16_t* out = nullptr;                     // [B, H, T, D] contiguous
  float* lse = nullptr;                        // [B, H, T] contiguous
  int64_t H = 0, T = 0, S = 0, group = 1;
  float scale = 1;
  bool causal = false, kv_shared = false;
  bool vector_loads = false;  // every row starts 16-byte aligned: tiles load 8 elements at a time
};

template <int D, bool kBF16> __global__ void __launch_bounds__(kThreads) flash_forward_kernel(FlashArgs a) {
  using H16 = Half16<kBF16>;
  constexpr int LD = D + kPad;
  const float kNegInf = -CUDART_INF_F;
  QKV_DYNAMIC_SHARED(unsigned char, smem_raw);
  uint16_t* Qs = reinterpret_cast<uint16_t*>(smem_raw);
  uint16_t* Ks = Qs + kTile * LD;
  uint16_t* Vs = a.kv_shared ? Ks : Ks + kTile * LD;  // K=V: one tile serves both products

  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32, g = lane / 4, t = lane % 4;
  const int64_t bh = blockIdx.x, b = bh / a.H, h = bh % a.H, hk = h / a.group;
  const int64_t i0 = int64_t(blockIdx.y) * kTile;
  load_tile<D>(Qs, a.q, a.qs, b, h, i0, a.T, a.vector_loads);
  __syncthreads();

  uint32_t qf[D / 16][4];  // the warp's 16 rows as A fragments, one per 16 columns
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk)
    ldmatrix_x4<false>(qf[kk], Qs + (warp * 16 + lane % 16) * LD + kk * 16 + (lane / 16) * 8);

  float o[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
  float m[2] = {kNegInf, kNegInf}, l[2] = {0.f, 0.f};  // rows g and g + 8; l: this lane's columns
  const int64_t rows[2] = {i0 + warp * 16 + g, i0 + warp * 16 + g + 8};
  const int64_t vis[2] = {rows[0] < a.T ? visible(a, rows[0]) : 0, rows[1] < a.T ? visible(a, rows[1]) : 0};
  const int64_t last_row = (i0 + kTile < a.T ? i0 + kTile : a.T) - 1;
  const int64_t kend = visible(a, last_row);  // no row of the block sees a key past this

  for (int64_t j0 = 0; j0 < kend; j0 += kTile) {
    __syncthreads();  // the previous tile's readers are done
    load_tile<D>(Ks, a.k, a.ks, b, hk, j0, a.S, a.vector_loads);
    if (!a.kv_shared) load_tile<D>(Vs, a.v, a.vs, b, hk, j0, a.S, a.vector_loads);
    __syncthreads();

    float s[kTile / 8][4];
#pragma unroll
    for (int n = 0; n < kTile / 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
#pragma unroll
      for (int n2 = 0; n2 < kTile / 16; ++n2) {  // keys n2*16 .. +15: two n-blocks per ldmatrix
        uint32_t kf[4];
        const int mat = lane / 8;
        ldmatrix_x4<false>(kf, Ks + (n2 * 16 + (mat / 2) * 8 + lane % 8) * LD + kk * 16 + (mat % 2) * 8);
        mma_16816<kBF16>(s[2 * n2], qf[kk], kf[0], kf[1]);
        mma_16816<kBF16>(s[2 * n2 + 1], qf[kk], kf[2], kf[3]);
      }

    float mx[2] = {m[0], m[1]};
#pragma unroll
    for (int n = 0; n < kTile / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = e / 2;
        const int64_t j = j0 + n * 8 + 2 * t + (e % 2);
        float x = s[n][e] * a.scale;
        if (j >= vis[r]) x = kNegInf;
        else if (a.bias) x += H16::to_float(a.bias[rows[r] * a.S + j]);
        s[n][e] = x;
        mx[r] = fmaxf(mx[r], x);
      }
    float corr[2], sum[2] = {0.f, 0.f};
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(kAll, mx[r], 1));
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(kAll, mx[r], 2));
      corr[r] = mx[r] == kNegInf ? 1.f : __expf(m[r] - mx[r]);  // m = -inf before: 0
      m[r] = mx[r];
    }
#pragma unroll
    for (int n = 0; n < kTile / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = e / 2;
        const float p = m[r] == kNegInf ? 0.f : __expf(s[n][e] - m[r]);
        s[n][e] = p;
        sum[r] += p;
      }
#pragma unroll
    for (int r = 0; r < 2; ++r) l[r] = l[r] * corr[r] + sum[r];
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      o[n][0] *= corr[0];
      o[n][1] *= corr[0];
      o[n][2] *= corr[1];
      o[n][3] *= corr[1];
    }

#pragma unroll
    for (int kc = 0; kc < kTile / 16; ++kc) {  // keys kc*16 .. +15 as the k dimension
      const uint32_t pf[4] = {H16::pack(s[2 * kc][0], s[2 * kc][1]), H16::pack(s[2 * kc][2], s[2 * kc][3]),
                              H16::pack(s[2 * kc + 1][0], s[2 * kc + 1][1]),
                              H16::pack(s[2 * kc + 1][2], s[2 * kc + 1][3])};
#pragma unroll
      for (int n2 = 0; n2 < D / 16; ++n2) {  // output columns n2*16 .. +15
        uint32_t vf[4];
        const int mat = lane / 8;
        ldmatrix_x4<true>(vf, Vs + (kc * 16 + (mat % 2) * 8 + lane % 8) * LD + n2 * 16 + (mat / 2) * 8);
        mma_16816<kBF16>(o[2 * n2], pf, vf[0], vf[1]);
        mma_16816<kBF16>(o[2 * n2 + 1], pf, vf[2], vf[3]);
      }
    }
  }

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(kAll, l[r], 1);
    l[r] += __shfl_xor_sync(kAll, l[r], 2);
    if (rows[r] >= a.T) continue;
    const bool empty = l[r] == 0.f;  // the row sees no key
    const float inv = empty ? 0.f : 1.f / l[r];
    const int64_t row = bh * a.T + rows[r];
    uint16_t* orow = a.out + row * D;
#pragma unroll
    for (int n = 0; n < D / 8; ++n)
      *reinterpret_cast<uint32_t*>(orow + n * 8 + 2 * t) = H16::pack(o[n][2 * r] * inv, o[n][2 * r + 1] * inv);
    if (t == 0) a.lse[row] = empty ? kNegInf : m[r] + logf(l[r]);
  }
}

size_t smem_bytes(int D, bool kv_shared) { return size_t(kv_shared ? 2 : 3) * kTile * (D + kPad) * sizeof(uint16_t); }

template <int D, bool kBF16> void launch(const FlashArgs& a, int64_t bh, int64_t qtiles) {
  const size_t smem = smem_bytes(D, a.kv_shared);
  auto* kernel = flash_forward_kernel<D, kBF16>;
  if (smem > 48 * 1024)
    QKV_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  QKV_LAUNCH(dim3(unsigned(bh), unsigned(qtiles)), kThreads, smem, launch_stream(), kernel)(a);
  QKV_CUDA_LAUNCH_CHECK();
}

}  // namespace

bool flash_attention_supports(const Tensor& q, const Tensor& k, const Tensor& v) {
  if (q.dtype() != DType::bf16 && q.dtype() != DType::f16) return false;
  const int64_t D = q.size(3);
  return (D == 64 || D == 128) && v.size(3) == D && q.stride(3) == 1 && k.stride(3) == 1 && v.stride(3) == 1;
}

void flash_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& bias,
                             const AttentionAttrs& attrs, const Tensor& out, const Tensor& lse) {
  FlashArgs a;
  a.q = bits(q);
  a.k = bits(k);
  a.v = bits(v);
  a.bias = bias.defined() ? bits(bias) : nullptr;  // contiguous [T, S] (attention.cu)
  for (int d = 0; d < 3; ++d) {
    a.qs[d] = q.stride(d);
    a.ks[d] = k.stride(d);
    a.vs[d] = v.stride(d);
  }
  a.out = static_cast<uint16_t*>(out.raw_data());
  a.lse = lse.data<float>();
  a.H = q.size(1);
  a.T = q.size(2);
  a.S = k.size(2);
  a.group = q.size(1) / k.size(1);
  a.scale = float(attrs.scale);
  a.causal = attrs.causal;
  a.kv_shared = same_view(k, v);
  a.vector_loads = aligned16(q) && aligned16(k) && aligned16(v);
  const int64_t bh = q.size(0) * a.H, qtiles = (a.T + kTile - 1) / kTile;
  if (bh == 0 || qtiles == 0) return;
  check<ValueError>(bh <= int64_t(INT32_MAX) && qtiles <= 65535,
                    "attention: too many heads or query tiles for one "
                    "launch (",
                    bh, " heads, ", qtiles, " tiles)");
  set_device(q);
  const bool bf = q.dtype() == DType::bf16;
  const int D = int(q.size(3));
  if (D == 64) bf ? launch<64, true>(a, bh, qtiles) : launch<64, false>(a, bh, qtiles);
  else bf ? launch<128, true>(a, bh, qtiles) : launch<128, false>(a, bh, qtiles);
}

}  // namespace qkv::kernels::cuda
