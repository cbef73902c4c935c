// Shared pieces of the CUDA kernels (private to kernels/cuda): launch sizes, the generic strided
// grid-stride kernel, warp/block reductions, and float/double math overloads that pick the
// float intrinsics for float and the double functions for double.
#pragma once
#include <cuda_runtime.h>
#include <math_constants.h>

#include <array>
#include <cmath>
#include <cstdint>

#include "tensor/cuda/check.h"
#include "tensor/cuda/indexer.cuh"
#include "tensor/tensor.h"

namespace qkv::kernels::cuda {

using qkv::cuda::blocks_for;
using qkv::cuda::Indexer;
using qkv::cuda::make_indexer;

inline constexpr int kThreads = 256;  // elementwise and per-row kernels
inline constexpr int kWarp = 32;
inline constexpr unsigned kMaxRowBlocks = 1u << 16;  // row kernels grid-stride beyond this

inline void set_device(const Tensor& t) { QKV_CUDA_CHECK(cudaSetDevice(t.device().index)); }

// Threads for a block that cooperates on one row of n elements: a multiple of 32 in [32, 256].
inline int row_threads(int64_t n) {
  int64_t t = (n + kWarp - 1) / kWarp * kWarp;
  return int(t < kWarp ? kWarp : t > kThreads ? kThreads : t);
}
// Blocks for a one-block-per-row kernel (at least one, so the launch is valid).
inline unsigned row_blocks(int64_t rows) {
  return unsigned(rows < 1 ? 1 : rows < int64_t(kMaxRowBlocks) ? rows : int64_t(kMaxRowBlocks));
}

// ---- grid-stride loops --------------------------------------------------------------------

__device__ __forceinline__ int64_t global_thread() { return blockIdx.x * int64_t(blockDim.x) + threadIdx.x; }
__device__ __forceinline__ int64_t grid_threads() { return int64_t(gridDim.x) * blockDim.x; }

// Calls f(offsets, i) for every flat index i < n, offsets being the N operands' element offsets.
template <size_t N, class F> __global__ void strided_kernel(Indexer<N> ix, int64_t n, F f) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    int64_t off[N];
    ix.offsets(i, off);
    f(off, i);
  }
}

// Runs f over `shape` with one stride vector per operand (already broadcast to `shape`).
template <size_t N, class F> void launch_strided(const Shape& shape, const std::array<Strides, N>& strides, F f) {
  const int64_t n = numel(shape);
  if (n == 0) return;
  const Indexer<N> ix = make_indexer(make_strided_loop<N>(shape, strides));
  strided_kernel<N><<<blocks_for(n, kThreads), kThreads>>>(ix, n, f);
  QKV_CUDA_LAUNCH_CHECK();
}

// Calls f(i) for every i < n.
template <class F> __global__ void flat_kernel(int64_t n, F f) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) f(i);
}

template <class F> void launch_flat(int64_t n, F f) {
  if (n == 0) return;
  flat_kernel<<<blocks_for(n, kThreads), kThreads>>>(n, f);
  QKV_CUDA_LAUNCH_CHECK();
}

// ---- reductions ---------------------------------------------------------------------------

struct SumOp {
  template <class T> __device__ __forceinline__ T operator()(T a, T b) const { return a + b; }
};
// Maximum that returns NaN when either side is NaN (floating types).
struct NanMaxOp {
  template <class T> __device__ __forceinline__ T operator()(T a, T b) const {
    if (a != a) return a;
    if (b != b) return b;
    return a > b ? a : b;
  }
};
// Plain maximum for softmax-like rows (a NaN there makes the whole row NaN anyway).
struct MaxOp {
  template <class T> __device__ __forceinline__ T operator()(T a, T b) const { return a > b ? a : b; }
};

template <class T, class Op> __device__ __forceinline__ T warp_reduce(T v, Op op) {
#pragma unroll
  for (int o = kWarp / 2; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Reduces one value per thread over the block (blockDim.x a multiple of 32, at most 1024) and
// returns the result to every thread. `smem` holds 32 T. Warps are combined in a fixed order,
// so the result is deterministic; the leading barrier lets callers reuse `smem` back to back.
template <class T, class Op> __device__ T block_reduce(T v, Op op, T* smem) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, warps = blockDim.x / kWarp;
  v = warp_reduce(v, op);
  __syncthreads();
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  T r = smem[0];
  for (int w = 1; w < warps; ++w) r = op(r, smem[w]);
  return r;
}

// ---- math: float intrinsics for float, double functions for double -------------------------

template <class T> __device__ __forceinline__ T neg_infinity();
template <> __device__ __forceinline__ float neg_infinity<float>() { return -CUDART_INF_F; }
template <> __device__ __forceinline__ double neg_infinity<double>() { return -CUDART_INF; }

__device__ __forceinline__ float exp_(float x) { return expf(x); }
__device__ __forceinline__ double exp_(double x) { return ::exp(x); }
__device__ __forceinline__ float log_(float x) { return logf(x); }
__device__ __forceinline__ double log_(double x) { return ::log(x); }
__device__ __forceinline__ float sqrt_(float x) { return sqrtf(x); }
__device__ __forceinline__ double sqrt_(double x) { return ::sqrt(x); }
__device__ __forceinline__ float tanh_(float x) { return tanhf(x); }
__device__ __forceinline__ double tanh_(double x) { return ::tanh(x); }
__device__ __forceinline__ float erf_(float x) { return erff(x); }
__device__ __forceinline__ double erf_(double x) { return ::erf(x); }
__device__ __forceinline__ float pow_(float x, float p) { return powf(x, p); }
__device__ __forceinline__ double pow_(double x, double p) { return ::pow(x, p); }

}  // namespace qkv::kernels::cuda
