// What the Hopper attention kernels share (private to kernels/cuda/attention/hopper): the block
// shape (a producer warpgroup and two consumer warpgroups, the registers each keeps), the tile
// sizes, the stage barriers, the masking rule, and the online softmax on wgmma accumulators.
#pragma once
#include <cstdint>

#include "kernels/cuda/attention/flash_fragments.cuh"
#include "kernels/cuda/attention/hopper/wgmma.cuh"
#include "kernels/cuda/launch.cuh"

namespace qkv::kernels::cuda::hopper {

inline constexpr int kBlockM = 128;  // query rows per block: two consumer warpgroups of 64
inline constexpr int kBlockN = 128;  // keys per tile
inline constexpr int kStages = 2;    // K/V tiles in flight
inline constexpr int kBlockThreads = 384;
inline constexpr int kConsumerThreads = 256;
// 384 threads start with 168 registers each (one block per multiprocessor): the producer gives
// 144 of its own back, which lets both consumers rise to 240 (24 + 2 x 240 = 504 = 3 x 168).
inline constexpr int kProducerRegisters = 24;
inline constexpr int kConsumerRegisters = 240;
inline constexpr float kNegInf = -__builtin_inff();

// Launches kKernel(p) with the block shape above and `smem` bytes of dynamic shared memory. The
// kernel is a template argument, so the emulated device's coverage record names it.
template <auto kKernel, class Params> void launch_blocks(const Params& p, dim3 grid, size_t smem) {
  QKV_CUDA_CHECK(cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  QKV_LAUNCH(grid, kBlockThreads, smem, launch_stream(), kKernel)(p);
  QKV_CUDA_LAUNCH_CHECK();
}

// Keys row i sees: all S, or bottom-right causal (j <= i + S - T).
__host__ __device__ __forceinline__ int visible_keys(bool causal, int T, int S, int i) {
  if (!causal) return S;
  const int64_t e = int64_t(i) + 1 + S - T;
  return e < 0 ? 0 : e > S ? S : int(e);
}

__device__ __forceinline__ unsigned char* align_1024(unsigned char* p) {
  return p + (1024 - sm90::smem_address(p) % 1024) % 1024;
}

// The mbarriers of a block: the tiles loaded once (the forward's Q) arrived; stage s's first and
// second streamed tiles (the forward's K and V) arrived; stage s released by every consumer.
struct Barriers {
  static constexpr int kCount = 1 + 3 * kStages;
  uint64_t* once;
  uint64_t* first;
  uint64_t* second;
  uint64_t* empty;
  static __device__ __forceinline__ Barriers at(unsigned char* p) {
    auto* b = reinterpret_cast<uint64_t*>(p);
    return {b, b + 1, b + 1 + kStages, b + 1 + 2 * kStages};
  }
  __device__ __forceinline__ void init() const {
    sm90::barrier_init(once, 1);
    for (int s = 0; s < kStages; ++s) {
      sm90::barrier_init(&first[s], 1);
      sm90::barrier_init(&second[s], 1);
      sm90::barrier_init(&empty[s], uint32_t(kConsumerThreads));
    }
    sm90::fence_barrier_init();
  }
  // The parity of stage use `j` (the j-th tile streamed, stage j % kStages).
  static __device__ __forceinline__ uint32_t parity(int j) { return uint32_t(j / kStages % 2); }
};

// Rows [row, row + kRows) of head (h, b), all D columns, as D / 64 boxes of `map` (whose boxes are
// kRows rows): a [D / 64][kRows][64] tile at dst, its bytes completed on `bar`.
template <int D, int kRows>
__device__ __forceinline__ void copy_tile(unsigned char* dst, const CUtensorMap* map, int row, int h, int b,
                                          uint64_t* bar) {
#pragma unroll
  for (int c = 0; c < D / 64; ++c) sm90::copy_box_4d(dst + c * kRows * 128, map, 64 * c, row, h, b, bar);
}

// What a tile's scores need masked or added: keys past S, causal limits, the bias.
struct MaskInfo {
  int T, S;
  bool causal;
  const uint16_t* bias;  // [T, S], or none
  int row0;              // the warpgroup's first row: it sees the fewest keys
  // Whether any score of the tile starting at key j0 needs the rule (warpgroup-uniform).
  __device__ __forceinline__ bool touches(int j0, int width) const {
    return bias != nullptr || j0 + width > visible_keys(causal, T, S, row0);
  }
};

// The online softmax of one thread's two rows (g and g + 8 of its warp's 16) in base 2: a tile's
// scores become probabilities in place, `corr` the factors the output rescales by.
template <bool kBF16> struct RowSoftmax {
  float scale_log2;
  int rows[2];
  float m[2] = {kNegInf, kNegInf}, l[2] = {0.f, 0.f};

  __device__ __forceinline__ RowSoftmax(float scale, int row) : scale_log2(scale), rows{row, row + 8} {}

  template <int N>
  __device__ __forceinline__ void update(float (&s)[N], int j0, const MaskInfo& mask, float (&corr)[2]) {
    const int q = int(threadIdx.x) % 4;
    float mx[2] = {m[0], m[1]};
    const bool masked = mask.touches(j0, 2 * N);
#pragma unroll
    for (int i = 0; i < N; ++i) {
      const int r = i / 2 % 2;
      float x = s[i] * scale_log2;
      if (masked) {
        const int j = j0 + 8 * (i / 4) + 2 * q + i % 2;
        if (j >= visible_keys(mask.causal, mask.T, mask.S, rows[r]) || rows[r] >= mask.T) x = kNegInf;
        else if (mask.bias)
          x += flash::Half16<kBF16>::to_float(mask.bias[int64_t(rows[r]) * mask.S + j]) * 1.4426950408889634f;
      }
      s[i] = x;
      mx[r] = fmaxf(mx[r], x);
    }
    float sum[2] = {0.f, 0.f};
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
      corr[r] = mx[r] == kNegInf ? 1.f : exp2f(m[r] - mx[r]);  // m = -inf before: 0
      m[r] = mx[r];
    }
#pragma unroll
    for (int i = 0; i < N; ++i) {
      const int r = i / 2 % 2;
      const float p = m[r] == kNegInf ? 0.f : exp2f(s[i] - m[r]);
      s[i] = p;
      sum[r] += p;
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) l[r] = l[r] * corr[r] + sum[r];
  }

  // O / l into the head's rows of out [T][D] (rows past T left alone), lse = m ln 2 + ln l.
  template <int N> __device__ __forceinline__ void finish(const float (&o)[N], uint16_t* out, float* lse, int T) {
    const int q = int(threadIdx.x) % 4;
    constexpr int D = 2 * N;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
      l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      if (rows[r] >= T) continue;
      const bool empty = l[r] == 0.f;  // the row sees no key
      const float inv = empty ? 0.f : 1.f / l[r];
      uint16_t* orow = out + int64_t(rows[r]) * D;
#pragma unroll
      for (int c = 0; c < N / 4; ++c)  // columns 8 c + 2 q and + 1
        *reinterpret_cast<uint32_t*>(orow + 8 * c + 2 * q) =
            flash::Half16<kBF16>::pack(o[4 * c + 2 * r] * inv, o[4 * c + 2 * r + 1] * inv);
      if (q == 0) lse[rows[r]] = empty ? kNegInf : m[r] * 0.6931471805599453f + logf(l[r]);
    }
  }
};

template <int N> __device__ __forceinline__ void rescale(float (&o)[N], const float (&corr)[2]) {
#pragma unroll
  for (int i = 0; i < N; ++i) o[i] *= corr[i / 2 % 2];
}

}  // namespace qkv::kernels::cuda::hopper
