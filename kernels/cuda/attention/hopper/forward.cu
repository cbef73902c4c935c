// The attention forward on Hopper (sm_90a) for bf16 and f16, the FlashAttention-3 design: one
// block of three warpgroups per (128 query rows, head, batch row). Warpgroup 0 is the producer:
// it gives most of its registers away (setmaxnreg) and one of its threads copies tiles with the
// bulk tensor copy, each completing on an mbarrier: Q once, then K and V tiles of 128 keys into
// two stages, each stage refilled once both consumers have released it. Warpgroups 1 and 2 are
// the consumers, 64 query rows each: S = Q K^T on wgmma with both operands in shared memory,
// the online softmax on the accumulators (scale, bias, mask, running max and sum, in base 2),
// then O += P V on wgmma with P from registers. Tile j's S product is issued together with tile
// j - 1's P V product, and the softmax of S_j runs while P V_{j-1} is still on the tensor cores.
//
// Semantics as the other attention kernels (kernels/cuda/attention/attention.cu): query head h
// reads KV head h / group (the copy's coordinates), bottom-right causal masking, the additive
// [T, S] bias, a row that sees no key gives zeros and lse -inf, and K and V as one tensor (K=V)
// load one tile that serves as K (K-major) and as V (N-major). Rows and keys past the ends
// arrive as zeros from the copy and are masked.
#include <cstdint>

#include "kernels/cuda/attention/flash_mma.cuh"
#include "kernels/cuda/attention/hopper/hopper_attention.h"
#include "kernels/cuda/attention/hopper/hopper_tiles.cuh"
#include "kernels/cuda/attention/hopper/tensor_maps.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/layout.h"
#include "tensor/cuda/check.h"

namespace qkv::kernels::cuda {
namespace {

using namespace hopper;

struct ForwardParams {
  CUtensorMap q, k, v;             // [B, H, L, D] maps, boxes of 64 columns by kBlockM (q) or kBlockN rows
  uint16_t* out = nullptr;         // [B, H, T, D] contiguous
  float* lse = nullptr;            // [B, H, T] contiguous
  const uint16_t* bias = nullptr;  // [T, S] contiguous, or none
  int H = 0, T = 0, S = 0, group = 1;
  float scale_log2 = 1;  // softmax scale times log2(e): the softmax runs in base 2
  bool causal = false, kv_shared = false;
};

// Shared memory from a 1024-aligned start: Q [D / 64][kBlockM][64], then kStages K tiles and
// (unless K=V) kStages V tiles [D / 64][kBlockN][64], then the barriers.
template <int D> struct ForwardSmem {
  static constexpr int kQ = kBlockM * D * 2, kTileKV = kBlockN * D * 2;
  static __host__ __device__ constexpr int v(bool kv_shared) { return kQ + kStages * kTileKV * (kv_shared ? 0 : 1); }
  static __host__ __device__ constexpr int barriers(bool kv_shared) {
    return kQ + kStages * kTileKV * (kv_shared ? 1 : 2);
  }
  // With up to 1023 bytes to reach the alignment.
  static size_t bytes(bool kv_shared) { return 1024 + size_t(barriers(kv_shared)) + 8 * Barriers::kCount; }
};

// The producer: Q, then every K (and V) tile into its stage once the consumers released it.
template <int D>
__device__ __forceinline__ void produce(const ForwardParams& p, unsigned char* q, unsigned char* k, unsigned char* v,
                                        Barriers& bar, int i0, int h, int b, int tiles) {
  constexpr int kTile = kBlockN * D * 2;
  sm90::arrive_expect_bytes(bar.once, uint32_t(kBlockM * D * 2));
  copy_tile<D, kBlockM>(q, &p.q, i0, h, b, bar.once);
  const int hk = h / p.group;
  for (int j = 0; j < tiles; ++j) {
    const int s = j % kStages;
    sm90::wait(&bar.empty[s], Barriers::parity(j) ^ 1u);  // a fresh stage counts as released
    sm90::arrive_expect_bytes(&bar.first[s], uint32_t(kTile));
    copy_tile<D, kBlockN>(k + s * kTile, &p.k, j * kBlockN, hk, b, &bar.first[s]);
    if (p.kv_shared) continue;
    sm90::arrive_expect_bytes(&bar.second[s], uint32_t(kTile));
    copy_tile<D, kBlockN>(v + s * kTile, &p.v, j * kBlockN, hk, b, &bar.second[s]);
  }
}

// One consumer warpgroup: 64 query rows from `row0`, their Q rows `q` (a [kBlockM][D] tile's).
// The first tile is peeled off the loop, so that every product the loop issues is waited for in
// the same iteration without a branch between: ptxas then keeps the products asynchronous.
template <int D, bool kBF16>
__device__ __forceinline__ void consume(const ForwardParams& p, const unsigned char* q, const unsigned char* k,
                                        const unsigned char* v, Barriers& bar, int row0, int bh, int tiles) {
  constexpr int kTile = kBlockN * D * 2;
  const int t = int(threadIdx.x) % 128;
  RowSoftmax<kBF16> sm(p.scale_log2, row0 + 16 * (t / 32) + t % 32 / 4);
  const MaskInfo mask{p.T, p.S, p.causal, p.bias, row0};
  float o[D / 2], s[kBlockN / 2], corr[2];
  uint32_t pr[kBlockN / 16][4];  // P of the previous tile as wgmma A registers
#pragma unroll
  for (float& x : o) x = 0.f;
  sm90::wait(bar.once, 0);
  // S_j = Q K_j^T, issued and committed.
  auto scores = [&](int j) {
    sm90::wait(&bar.first[j % kStages], Barriers::parity(j));
    sm90::fence_operands(s);
    sm90::wgmma_fence();
    sm90::tile_ss<kBlockN, D, kBlockM, kBlockN, kBF16>(s, q, k + j % kStages * kTile);
    sm90::wgmma_commit();
  };
  // O += P_j V_j, issued and committed.
  auto accumulate = [&](int j) {
    const int st = j % kStages;
    if (!p.kv_shared) sm90::wait(&bar.second[st], Barriers::parity(j));
    sm90::fence_operands(o);
    sm90::wgmma_fence();
    sm90::tile_rs<D, kBlockN, kBlockN, kBF16>(o, pr, (p.kv_shared ? k : v) + st * kTile, true);
    sm90::wgmma_commit();
  };
  auto probabilities = [&] {
#pragma unroll
    for (int kc = 0; kc < kBlockN / 16; ++kc) sm90::to_a<kBF16>(pr[kc], s, kc);
    sm90::fence_operands(pr);
  };
  if (tiles > 0) {
    scores(0);
    sm90::wgmma_wait<0>();
    sm90::fence_operands(s);
    sm.update(s, 0, mask, corr);
    probabilities();
  }
  for (int j = 1; j < tiles; ++j) {
    scores(j);
    accumulate(j - 1);      // on the tensor cores while S_j's softmax runs
    sm90::wgmma_wait<1>();  // S_j
    sm90::fence_operands(s);
    sm.update(s, j * kBlockN, mask, corr);
    sm90::wgmma_wait<0>();  // P V_{j-1}: its stage may be refilled, O rescaled
    sm90::fence_operands(o);
    sm90::arrive(&bar.empty[(j - 1) % kStages]);
    rescale(o, corr);
    probabilities();
  }
  if (tiles > 0) {
    accumulate(tiles - 1);
    sm90::wgmma_wait<0>();
    sm90::fence_operands(o);
  }
  sm.finish(o, p.out + int64_t(bh) * p.T * D, p.lse + int64_t(bh) * p.T, p.T);
}

template <int D, bool kBF16>
__global__ void __launch_bounds__(kBlockThreads, 1) hopper_forward_kernel(const __grid_constant__ ForwardParams p) {
#if defined(QKV_HOPPER_DEVICE)
  QKV_DYNAMIC_SHARED(unsigned char, raw);
  unsigned char* smem = align_1024(raw);
  using Smem = ForwardSmem<D>;
  unsigned char* q = smem;
  unsigned char* k = smem + Smem::kQ;
  unsigned char* v = smem + Smem::v(p.kv_shared);
  Barriers bar = Barriers::at(smem + Smem::barriers(p.kv_shared));
  const int m_block = int(blockIdx.x), h = int(blockIdx.y), b = int(blockIdx.z);
  const int i0 = m_block * kBlockM;
  const int last_row = min(i0 + kBlockM, p.T) - 1;
  const int kend = visible_keys(p.causal, p.T, p.S, last_row);  // no row of the block sees past this
  const int tiles = (kend + kBlockN - 1) / kBlockN;
  if (threadIdx.x == 0) bar.init();
  __syncthreads();
  const int wg = int(threadIdx.x) / 128;
  if (wg == 0) {
    sm90::registers_down<kProducerRegisters>();
    if (threadIdx.x == 0) produce<D>(p, q, k, v, bar, i0, h, b, tiles);
    return;
  }
  sm90::registers_up<kConsumerRegisters>();
  const int half = wg - 1;
  consume<D, kBF16>(p, q + half * 64 * 128, k, v, bar, i0 + 64 * half, b * p.H + h, tiles);
#endif
}

template <int D, bool kBF16> void launch(const ForwardParams& p, int B) {
  launch_blocks<hopper_forward_kernel<D, kBF16>>(
      p, dim3(unsigned((p.T + kBlockM - 1) / kBlockM), unsigned(p.H), unsigned(B)), ForwardSmem<D>::bytes(p.kv_shared));
}

}  // namespace

void hopper_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& bias,
                              const AttentionAttrs& attrs, const Tensor& out, const Tensor& lse) {
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), S = k.size(2);
  if (B * H * T == 0) return;
  check<ValueError>(B <= 65535 && H <= 65535 && T <= int64_t(INT32_MAX) - kBlockM && S <= int64_t(INT32_MAX) - kBlockN,
                    "attention: too many batch rows, heads or positions for one launch (", B, ", ", H, ", ", T, ", ", S,
                    ")");
  ForwardParams p;
  p.q = head_rows_map(q, kBlockM);
  p.k = head_rows_map(k, kBlockN);
  p.kv_shared = same_view(k, v);
  p.v = p.kv_shared ? p.k : head_rows_map(v, kBlockN);
  p.out = static_cast<uint16_t*>(out.raw_data());
  p.lse = lse.data<float>();
  p.bias = bias.defined() ? flash::bits(bias) : nullptr;  // contiguous [T, S] (attention.cu)
  p.H = int(H);
  p.T = int(T);
  p.S = int(S);
  p.group = int(H / k.size(1));
  p.scale_log2 = float(attrs.scale * 1.4426950408889634);
  p.causal = attrs.causal;
  set_device(q);
  const bool bf = q.dtype() == DType::bf16;
  if (q.size(3) == 64) bf ? launch<64, true>(p, int(B)) : launch<64, false>(p, int(B));
  else bf ? launch<128, true>(p, int(B)) : launch<128, false>(p, int(B));
}

}  // namespace qkv::kernels::cuda
