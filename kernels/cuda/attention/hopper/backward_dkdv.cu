// The attention backward's dK and dV on Hopper (sm_90a) for bf16 and f16, with the forward's
// block shape (hopper/forward.cu): one block per (128 keys, KV head, batch row). The producer
// warpgroup copies the block's K and V tiles once, then streams the query tiles that see them —
// Q and dO, 64 rows each, for every query head of the KV head's group in turn — through two
// stages. Each consumer warpgroup owns 64 of the keys, everything transposed so that the keys are
// the products' rows:
//   S^T  = K Q^T          wgmma, A = K rows, B = Q rows (both K-major in shared memory)
//   dP^T = V dO^T         wgmma, A = V rows, B = dO rows
//   P^T  = exp(scale S^T + bias - lse)    0 where masked or where the query saw no key
//   dS^T = P^T (dP^T - delta)
//   dV  += P^T dO         wgmma, A = P^T from registers, B = dO (N-major)
//   dK  += dS^T Q         wgmma, A = dS^T from registers, B = Q (N-major)
// and writes dK (times the scale) and dV once at the end: every element has one owner, so the
// result is the same bits every run. A key no query sees gets zeros. K=V: one tile serves as K
// and as V; dK and dV are still two outputs (the autograd rule sums them).
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

constexpr int kKeys = 128;    // keys per block: two consumer warpgroups of 64
constexpr int kQueries = 64;  // query rows per streamed tile

// q, dO in boxes of kQueries rows, k, v of kKeys rows.
struct DkdvParams : BackwardParams {
  uint16_t *dk = nullptr, *dv = nullptr;  // [B, Hk, S, D] contiguous
};

// From a 1024-aligned start: K, V (unless K=V) [D / 64][kKeys][64], then per stage Q and dO
// [D / 64][kQueries][64], then the barriers.
template <int D> struct DkdvSmem {
  static constexpr int kKV = kKeys * D * 2, kStream = kQueries * D * 2;
  static __host__ __device__ constexpr int stream(bool kv_shared) { return kKV * (kv_shared ? 1 : 2); }
  static __host__ __device__ constexpr int barriers(bool kv_shared) {
    return stream(kv_shared) + kStages * 2 * kStream;
  }
  static size_t bytes(bool kv_shared) { return 1024 + size_t(barriers(kv_shared)) + 8 * Barriers::kCount; }
};

// The first query tile with a row that sees key k0 (bottom-right causal: i >= k0 - S + T).
__host__ __device__ int first_query_tile(bool causal, int T, int S, int k0) {
  const int64_t i = causal ? int64_t(k0) - S + T : 0;
  return i <= 0 ? 0 : int(i / kQueries);
}

template <int D>
__device__ __forceinline__ void produce(const DkdvParams& p, unsigned char* k, unsigned char* v, unsigned char* stream,
                                        Barriers& bar, int k0, int hk, int b, int m0, int tiles_per_head) {
  constexpr int kStream = DkdvSmem<D>::kStream;
  sm90::arrive_expect_bytes(bar.once, uint32_t(kKeys * D * 2 * (p.kv_shared ? 1 : 2)));
  copy_tile<D, kKeys>(k, &p.k, k0, hk, b, bar.once);
  if (!p.kv_shared) copy_tile<D, kKeys>(v, &p.v, k0, hk, b, bar.once);
  for (int it = 0; it < p.group * tiles_per_head; ++it) {
    const int s = it % kStages, h = hk * p.group + it / tiles_per_head, i0 = (m0 + it % tiles_per_head) * kQueries;
    unsigned char* q = stream + s * 2 * kStream;
    sm90::wait(&bar.empty[s], Barriers::parity(it) ^ 1u);
    sm90::arrive_expect_bytes(&bar.first[s], uint32_t(kStream));
    copy_tile<D, kQueries>(q, &p.q, i0, h, b, &bar.first[s]);
    sm90::arrive_expect_bytes(&bar.second[s], uint32_t(kStream));
    copy_tile<D, kQueries>(q + kStream, &p.g, i0, h, b, &bar.second[s]);
  }
}

// One consumer warpgroup: keys key0 .. key0 + 63, their K and V rows at k, v.
template <int D, bool kBF16>
__device__ __forceinline__ void consume(const DkdvParams& p, const unsigned char* k, const unsigned char* v,
                                        const unsigned char* stream, Barriers& bar, int key0, int hk, int b, int m0,
                                        int tiles_per_head) {
  constexpr int kStream = DkdvSmem<D>::kStream;
  const int t = int(threadIdx.x) % 128, q4 = t % 4;
  const int keys[2] = {key0 + 16 * (t / 32) + t % 32 / 4, key0 + 16 * (t / 32) + t % 32 / 4 + 8};
  float dk[D / 2], dv[D / 2], st[kQueries / 2], dpt[kQueries / 2];
  uint32_t pt[kQueries / 16][4], dst[kQueries / 16][4];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) dk[i] = dv[i] = 0.f;
  sm90::wait(bar.once, 0);
  for (int it = 0; it < p.group * tiles_per_head; ++it) {
    const int s = it % kStages, h = hk * p.group + it / tiles_per_head, i0 = (m0 + it % tiles_per_head) * kQueries;
    const unsigned char* q = stream + s * 2 * kStream;
    const unsigned char* g = q + kStream;
    sm90::wait(&bar.first[s], Barriers::parity(it));
    sm90::wait(&bar.second[s], Barriers::parity(it));
    sm90::fence_operands(st);
    sm90::fence_operands(dpt);
    sm90::wgmma_fence();
    sm90::tile_ss<kQueries, D, kKeys, kQueries, kBF16>(st, k, q);
    sm90::tile_ss<kQueries, D, kKeys, kQueries, kBF16>(dpt, v, g);
    sm90::wgmma_commit();
    sm90::wgmma_wait<0>();
    sm90::fence_operands(st);
    sm90::fence_operands(dpt);
    const int64_t head = (int64_t(b) * p.H + h) * p.T;
#pragma unroll
    for (int i = 0; i < kQueries / 2; ++i) {  // column i0 + 8 (i / 4) + 2 q + i % 2 is a query row
      const int row = i0 + 8 * (i / 4) + 2 * q4 + i % 2, key = keys[i / 2 % 2];
      float pr = 0.f, ds = 0.f;
      if (row < p.T && key < visible_keys(p.causal, p.T, p.S, row)) {
        const float lse = p.lse[head + row];
        float x = st[i] * p.scale_log2 - lse * 1.4426950408889634f;
        if (p.bias) x += flash::Half16<kBF16>::to_float(p.bias[int64_t(row) * p.S + key]) * 1.4426950408889634f;
        pr = lse == kNegInf ? 0.f : exp2f(x);
        ds = pr * (dpt[i] - p.delta[head + row]);
      }
      st[i] = pr;
      dpt[i] = ds;
    }
#pragma unroll
    for (int kc = 0; kc < kQueries / 16; ++kc) {
      sm90::to_a<kBF16>(pt[kc], st, kc);
      sm90::to_a<kBF16>(dst[kc], dpt, kc);
    }
    sm90::fence_operands(pt);
    sm90::fence_operands(dst);
    sm90::fence_operands(dv);
    sm90::fence_operands(dk);
    sm90::wgmma_fence();
    sm90::tile_rs<D, kQueries, kQueries, kBF16>(dv, pt, g, true);
    sm90::tile_rs<D, kQueries, kQueries, kBF16>(dk, dst, q, true);
    sm90::wgmma_commit();
    sm90::wgmma_wait<0>();
    sm90::fence_operands(dv);
    sm90::fence_operands(dk);
    sm90::arrive(&bar.empty[s]);
  }
  const int64_t head = (int64_t(b) * p.Hk + hk) * p.S;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (keys[r] >= p.S) continue;
    uint16_t* dk_row = p.dk + (head + keys[r]) * D;
    uint16_t* dv_row = p.dv + (head + keys[r]) * D;
#pragma unroll
    for (int c = 0; c < D / 8; ++c) {  // columns 8 c + 2 q and + 1
      *reinterpret_cast<uint32_t*>(dk_row + 8 * c + 2 * q4) =
          flash::Half16<kBF16>::pack(dk[4 * c + 2 * r] * p.scale, dk[4 * c + 2 * r + 1] * p.scale);
      *reinterpret_cast<uint32_t*>(dv_row + 8 * c + 2 * q4) =
          flash::Half16<kBF16>::pack(dv[4 * c + 2 * r], dv[4 * c + 2 * r + 1]);
    }
  }
}

template <int D, bool kBF16>
__global__ void __launch_bounds__(kBlockThreads, 1) hopper_dkdv_kernel(const __grid_constant__ DkdvParams p) {
#if defined(QKV_HOPPER_DEVICE)
  QKV_DYNAMIC_SHARED(unsigned char, raw);
  unsigned char* smem = align_1024(raw);
  using Smem = DkdvSmem<D>;
  unsigned char* k = smem;
  unsigned char* v = p.kv_shared ? k : smem + Smem::kKV;
  unsigned char* stream = smem + Smem::stream(p.kv_shared);
  Barriers bar = Barriers::at(smem + Smem::barriers(p.kv_shared));
  const int k0 = int(blockIdx.x) * kKeys, hk = int(blockIdx.y), b = int(blockIdx.z);
  const int m0 = first_query_tile(p.causal, p.T, p.S, k0), m_end = (p.T + kQueries - 1) / kQueries;
  const int tiles_per_head = m_end > m0 ? m_end - m0 : 0;
  if (threadIdx.x == 0) bar.init();
  __syncthreads();
  const int wg = int(threadIdx.x) / 128;
  if (wg == 0) {
    sm90::registers_down<kProducerRegisters>();
    if (threadIdx.x == 0) produce<D>(p, k, v, stream, bar, k0, hk, b, m0, tiles_per_head);
    return;
  }
  sm90::registers_up<kConsumerRegisters>();
  const int half = wg - 1;
  consume<D, kBF16>(p, k + half * 64 * 128, v + half * 64 * 128, stream, bar, k0 + 64 * half, hk, b, m0,
                    tiles_per_head);
#endif
}

template <int D, bool kBF16> void launch(const DkdvParams& p, int B) {
  launch_blocks<hopper_dkdv_kernel<D, kBF16>>(p, dim3(unsigned((p.S + kKeys - 1) / kKeys), unsigned(p.Hk), unsigned(B)),
                                              DkdvSmem<D>::bytes(p.kv_shared));
}

}  // namespace

void hopper_attention_dkdv(const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v,
                           const BackwardArgs& a) {
  if (a.B * a.Hk * a.S == 0) return;
  DkdvParams p;
  static_cast<BackwardParams&>(p) = backward_params(grad_out, q, k, v, a, kQueries, kKeys);
  p.dk = a.dk;
  p.dv = a.dv;
  set_device(q);
  const bool bf = q.dtype() == DType::bf16;
  if (q.size(3) == 64) bf ? launch<64, true>(p, int(a.B)) : launch<64, false>(p, int(a.B));
  else bf ? launch<128, true>(p, int(a.B)) : launch<128, false>(p, int(a.B));
}

}  // namespace qkv::kernels::cuda
