// The attention backward's dQ on Hopper (sm_90a) for bf16 and f16, with the forward's block shape
// (hopper/forward.cu): one block per (128 query rows, head, batch row). The producer warpgroup
// copies the block's Q and dO rows once, then streams the K and V tiles (64 keys each) its rows
// see through two stages. Each consumer warpgroup owns 64 of the rows:
//   S  = Q K^T                wgmma, A = Q rows, B = K rows (both K-major in shared memory)
//   dP = dO V^T               wgmma, A = dO rows, B = V rows
//   dS = P (dP - delta), P = exp(scale S + bias - lse), 0 where masked or the row saw no key
//   dQ += dS K                wgmma, A = dS from registers, B = K (N-major)
// and writes dQ times the scale once at the end (one owner per element: the same bits every run).
// K=V: one tile serves as K and as V.
#include <cstdint>

#include "kernels/cuda/attention/flash_backward_args.h"
#include "kernels/cuda/attention/flash_mma.cuh"
#include "kernels/cuda/attention/hopper/backward_params.h"
#include "kernels/cuda/attention/hopper/hopper_attention.h"
#include "kernels/cuda/attention/hopper/hopper_tiles.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/layout.h"
#include "tensor/cuda/check.h"

namespace qkv::kernels::cuda {
namespace {

using namespace hopper;

constexpr int kRows = 128;  // query rows per block: two consumer warpgroups of 64
constexpr int kKeys = 64;   // keys per streamed tile

// q, dO in boxes of kRows rows, k, v of kKeys rows.
struct DqParams : BackwardParams {
  uint16_t* dq = nullptr;  // [B, H, T, D] contiguous
};

// From a 1024-aligned start: Q and dO [D / 64][kRows][64], then per stage K and V (unless K=V)
// [D / 64][kKeys][64], then the barriers.
template <int D> struct DqSmem {
  static constexpr int kOnce = kRows * D * 2, kTile = kKeys * D * 2;
  static __host__ __device__ constexpr int stage_bytes(bool kv_shared) { return kTile * (kv_shared ? 1 : 2); }
  static __host__ __device__ constexpr int barriers(bool kv_shared) {
    return 2 * kOnce + kStages * stage_bytes(kv_shared);
  }
  static size_t bytes(bool kv_shared) { return 1024 + size_t(barriers(kv_shared)) + 8 * Barriers::kCount; }
};

template <int D>
__device__ __forceinline__ void produce(const DqParams& p, unsigned char* q, unsigned char* stages, Barriers& bar,
                                        int i0, int h, int b, int tiles) {
  using Smem = DqSmem<D>;
  sm90::arrive_expect_bytes(bar.once, uint32_t(2 * Smem::kOnce));
  copy_tile<D, kRows>(q, &p.q, i0, h, b, bar.once);
  copy_tile<D, kRows>(q + Smem::kOnce, &p.g, i0, h, b, bar.once);
  const int hk = h / p.group;
  for (int j = 0; j < tiles; ++j) {
    const int s = j % kStages;
    unsigned char* kt = stages + s * Smem::stage_bytes(p.kv_shared);
    sm90::wait(&bar.empty[s], Barriers::parity(j) ^ 1u);
    sm90::arrive_expect_bytes(&bar.first[s], uint32_t(Smem::kTile));
    copy_tile<D, kKeys>(kt, &p.k, j * kKeys, hk, b, &bar.first[s]);
    if (p.kv_shared) continue;
    sm90::arrive_expect_bytes(&bar.second[s], uint32_t(Smem::kTile));
    copy_tile<D, kKeys>(kt + Smem::kTile, &p.v, j * kKeys, hk, b, &bar.second[s]);
  }
}

// One consumer warpgroup: rows row0 .. row0 + 63, their Q and dO rows at q, g.
template <int D, bool kBF16>
__device__ __forceinline__ void consume(const DqParams& p, const unsigned char* q, const unsigned char* g,
                                        const unsigned char* stages, Barriers& bar, int row0, int bh, int tiles) {
  using Smem = DqSmem<D>;
  const int t = int(threadIdx.x) % 128, q4 = t % 4;
  const int rows[2] = {row0 + 16 * (t / 32) + t % 32 / 4, row0 + 16 * (t / 32) + t % 32 / 4 + 8};
  const int64_t head = int64_t(bh) * p.T;
  float lse2[2], delta[2];  // per row: lse in base 2 (-inf: the row saw no key), delta
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const bool in = rows[r] < p.T;
    lse2[r] = in ? p.lse[head + rows[r]] * 1.4426950408889634f : kNegInf;
    delta[r] = in ? p.delta[head + rows[r]] : 0.f;
  }
  float dq[D / 2], s[kKeys / 2], dp[kKeys / 2];
  uint32_t ds[kKeys / 16][4];
#pragma unroll
  for (float& x : dq) x = 0.f;
  sm90::wait(bar.once, 0);
  for (int j = 0; j < tiles; ++j) {
    const int st = j % kStages;
    const unsigned char* kt = stages + st * Smem::stage_bytes(p.kv_shared);
    const unsigned char* vt = p.kv_shared ? kt : kt + Smem::kTile;
    sm90::wait(&bar.first[st], Barriers::parity(j));
    if (!p.kv_shared) sm90::wait(&bar.second[st], Barriers::parity(j));
    sm90::fence_operands(s);
    sm90::fence_operands(dp);
    sm90::wgmma_fence();
    sm90::tile_ss<kKeys, D, kRows, kKeys, kBF16>(s, q, kt);
    sm90::tile_ss<kKeys, D, kRows, kKeys, kBF16>(dp, g, vt);
    sm90::wgmma_commit();
    sm90::wgmma_wait<0>();
    sm90::fence_operands(s);
    sm90::fence_operands(dp);
#pragma unroll
    for (int i = 0; i < kKeys / 2; ++i) {
      const int r = i / 2 % 2, key = j * kKeys + 8 * (i / 4) + 2 * q4 + i % 2;
      float d = 0.f;
      if (rows[r] < p.T && key < visible_keys(p.causal, p.T, p.S, rows[r]) && lse2[r] != kNegInf) {
        float x = s[i] * p.scale_log2 - lse2[r];
        if (p.bias) x += flash::Half16<kBF16>::to_float(p.bias[int64_t(rows[r]) * p.S + key]) * 1.4426950408889634f;
        d = exp2f(x) * (dp[i] - delta[r]);
      }
      s[i] = d;
    }
#pragma unroll
    for (int kc = 0; kc < kKeys / 16; ++kc) sm90::to_a<kBF16>(ds[kc], s, kc);
    sm90::fence_operands(ds);
    sm90::fence_operands(dq);
    sm90::wgmma_fence();
    sm90::tile_rs<D, kKeys, kKeys, kBF16>(dq, ds, kt, true);
    sm90::wgmma_commit();
    sm90::wgmma_wait<0>();
    sm90::fence_operands(dq);
    sm90::arrive(&bar.empty[st]);
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (rows[r] >= p.T) continue;
    uint16_t* row = p.dq + (head + rows[r]) * D;
#pragma unroll
    for (int c = 0; c < D / 8; ++c)
      *reinterpret_cast<uint32_t*>(row + 8 * c + 2 * q4) =
          flash::Half16<kBF16>::pack(dq[4 * c + 2 * r] * p.scale, dq[4 * c + 2 * r + 1] * p.scale);
  }
}

template <int D, bool kBF16>
__global__ void __launch_bounds__(kBlockThreads, 1) hopper_dq_kernel(const __grid_constant__ DqParams p) {
#if defined(QKV_HOPPER_DEVICE)
  QKV_DYNAMIC_SHARED(unsigned char, raw);
  unsigned char* smem = align_1024(raw);
  using Smem = DqSmem<D>;
  unsigned char* q = smem;
  unsigned char* stages = smem + 2 * Smem::kOnce;
  Barriers bar = Barriers::at(smem + Smem::barriers(p.kv_shared));
  const int i0 = int(blockIdx.x) * kRows, h = int(blockIdx.y), b = int(blockIdx.z);
  const int kend = visible_keys(p.causal, p.T, p.S, min(i0 + kRows, p.T) - 1);
  const int tiles = (kend + kKeys - 1) / kKeys;
  if (threadIdx.x == 0) bar.init();
  __syncthreads();
  const int wg = int(threadIdx.x) / 128;
  if (wg == 0) {
    sm90::registers_down<kProducerRegisters>();
    if (threadIdx.x == 0) produce<D>(p, q, stages, bar, i0, h, b, tiles);
    return;
  }
  sm90::registers_up<kConsumerRegisters>();
  const int half = wg - 1;
  consume<D, kBF16>(p, q + half * 64 * 128, q + Smem::kOnce + half * 64 * 128, stages, bar, i0 + 64 * half, b * p.H + h,
                    tiles);
#endif
}

template <int D, bool kBF16> void launch(const DqParams& p, int B) {
  launch_blocks<hopper_dq_kernel<D, kBF16>>(p, dim3(unsigned((p.T + kRows - 1) / kRows), unsigned(p.H), unsigned(B)),
                                            DqSmem<D>::bytes(p.kv_shared));
}

}  // namespace

void hopper_attention_dq(const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v,
                         const BackwardArgs& a) {
  if (a.B * a.H * a.T == 0) return;
  DqParams p;
  static_cast<BackwardParams&>(p) = backward_params(grad_out, q, k, v, a, kRows, kKeys);
  p.dq = a.dq;
  set_device(q);
  const bool bf = q.dtype() == DType::bf16;
  if (q.size(3) == 64) bf ? launch<64, true>(p, int(a.B)) : launch<64, false>(p, int(a.B));
  else bf ? launch<128, true>(p, int(a.B)) : launch<128, false>(p, int(a.B));
}

}  // namespace qkv::kernels::cuda
