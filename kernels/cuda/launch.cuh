// Shared pieces of the CUDA kernels (private to kernels/cuda): launch sizes, the generic strided
// grid-stride kernel, elementwise maps (launch_elementwise: 16-byte vector loads and stores on
// contiguous operands, the strided kernel otherwise), warp/block reductions, and float/double
// math overloads that pick the float intrinsics for float and the double functions for double.
#pragma once
#include <cuda_runtime.h>
#include <math_constants.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <utility>

#include "tensor/cuda/check.h"
#include "tensor/cuda/indexer.cuh"
#include "tensor/cuda/kernel_launch.h"
#include "tensor/cuda/stream.h"
#include "tensor/tensor.h"
#include "tensor/view.h"

namespace qkv::kernels::cuda {

using qkv::cuda::blocks_for;
using qkv::cuda::Indexer;
using qkv::cuda::make_indexer;

inline constexpr int kThreads = 256;  // elementwise and per-row kernels
inline constexpr int kWarp = 32;
inline constexpr unsigned kMaxRowBlocks = 1u << 16;  // row kernels grid-stride beyond this

inline void set_device(const Tensor& t) { QKV_CUDA_CHECK(cudaSetDevice(t.device().index)); }
// The stream every kernel, cuBLASLt and CUB call goes to (tensor/cuda/stream.h).
inline cudaStream_t launch_stream() { return ::qkv::cuda::current_stream(); }

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
  QKV_LAUNCH(blocks_for(n, kThreads), kThreads, 0, launch_stream(), strided_kernel<N>)(ix, n, f);
  QKV_CUDA_LAUNCH_CHECK();
}

// Calls f(i) for every i < n.
template <class F> __global__ void flat_kernel(int64_t n, F f) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) f(i);
}

template <class F> void launch_flat(int64_t n, F f) {
  if (n == 0) return;
  QKV_LAUNCH(blocks_for(n, kThreads), kThreads, 0, launch_stream(), flat_kernel)(n, f);
  QKV_CUDA_LAUNCH_CHECK();
}

// ---- elementwise maps ---------------------------------------------------------------------

// V elements of T as one aligned unit: copying one compiles to a single vector load or store
// (128-bit when V * sizeof(T) == 16).
template <class T, int V> struct alignas(sizeof(T) * V) Pack { T v[V]; };

template <class T, int V> __device__ __forceinline__ Pack<T, V> load_pack(const T* p) {
  return *reinterpret_cast<const Pack<T, V>*>(p);
}
// out[0, V) = f(x[e]...) for each lane e of the input packs.
template <int V, class TO, class F, class... TI>
__device__ __forceinline__ void map_pack(TO* out, const F& f, const Pack<TI, V>&... x) {
  Pack<TO, V> o;
#pragma unroll
  for (int e = 0; e < V; ++e) o.v[e] = f(x.v[e]...);
  *reinterpret_cast<Pack<TO, V>*>(out) = o;
}

// out = f(in...) elementwise, f taking the inputs' element types and returning one convertible
// to TO. Serves both kernels: strided_kernel calls operator() with the operands' offsets;
// packed_map_kernel calls pack() / one() with flat indices, reading input k at i, or at
// i % row when bit k of row_mask is set (a row of `row` elements repeated over the leading dims).
template <class TO, class F, class... TI> struct ElementwiseMap {
  static_assert(sizeof...(TI) > 0, "an elementwise map needs an input");
  static constexpr size_t kIn = sizeof...(TI);
  static constexpr size_t widest() {
    size_t m = sizeof(TO);
    ((m = sizeof(TI) > m ? sizeof(TI) : m), ...);
    return m;
  }
  // Elements per vector: 16 bytes of the widest operand (the narrower ones load fewer bytes).
  static constexpr int kWidth = int(16 / widest());
  using Seq = std::index_sequence_for<TI...>;

  TO* out;
  const void* in[kIn];
  F f;
  int64_t row;
  unsigned row_mask;

  __device__ __forceinline__ int64_t at(size_t k, int64_t i, int64_t r) const { return (row_mask >> k & 1u) ? r : i; }

  template <size_t... K>
  __device__ __forceinline__ void strided_at(const int64_t (&off)[kIn + 1], std::index_sequence<K...>) const {
    out[off[0]] = f(static_cast<const TI*>(in[K])[off[K + 1]]...);
  }
  __device__ void operator()(const int64_t (&off)[kIn + 1], int64_t) const { strided_at(off, Seq{}); }

  // Elements [i, i + kWidth), i a multiple of kWidth.
  template <size_t... K> __device__ __forceinline__ void pack(int64_t i, std::index_sequence<K...>) const {
    const int64_t r = row_mask ? i % row : 0;
    map_pack<kWidth>(out + i, f, load_pack<TI, kWidth>(static_cast<const TI*>(in[K]) + at(K, i, r))...);
  }
  template <size_t... K> __device__ __forceinline__ void one(int64_t i, std::index_sequence<K...>) const {
    const int64_t r = row_mask ? i % row : 0;
    out[i] = f(static_cast<const TI*>(in[K])[at(K, i, r)]...);
  }
};

// One thread per kWidth-element vector, then a scalar tail of n % kWidth elements.
template <class M> __global__ void packed_map_kernel(M m, int64_t n) {
  constexpr int V = M::kWidth;
  const int64_t packs = n / V;
  for (int64_t p = global_thread(); p < packs; p += grid_threads()) m.pack(p * V, typename M::Seq{});
  for (int64_t i = packs * V + global_thread(); i < n; i += grid_threads()) m.one(i, typename M::Seq{});
}

// One row of shape.back() contiguous elements read at every index of the leading dims.
inline bool is_broadcast_row(const Shape& shape, const Strides& st) {
  if (shape.empty() || st.back() != 1) return false;
  for (size_t d = 0; d + 1 < shape.size(); ++d)
    if (shape[d] != 1 && st[d] != 0) return false;
  return true;
}
inline bool aligned_to(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// out = f(ins...) elementwise, the inputs broadcast to out's shape (device tensors of types TI).
// When out is contiguous and every input is either contiguous with out's shape or a row
// broadcast along the last dim whose length is a multiple of the vector width, and every pointer
// is aligned to its vector, it runs packed_map_kernel (16-byte loads of the widest operand);
// otherwise the strided kernel. Each element is computed by the same f either way.
template <class TO, class... TI, class F>
void launch_elementwise(const Tensor& out, const std::array<const Tensor*, sizeof...(TI)>& ins, F f) {
  using M = ElementwiseMap<TO, F, TI...>;
  constexpr size_t N = sizeof...(TI) + 1;
  constexpr int V = M::kWidth;
  constexpr size_t in_sizes[] = {sizeof(TI)...};
  const Shape& shape = out.shape();
  const int64_t n = numel(shape);
  if (n == 0) return;
  M m{static_cast<TO*>(out.raw_data()), {}, f, 0, 0u};
  std::array<Strides, N> st;
  st[0] = out.strides();
  bool packed = raw::is_contiguous(shape, st[0]) && aligned_to(m.out, V * sizeof(TO));
  unsigned row_mask = 0;
  for (size_t k = 0; k + 1 < N; ++k) {
    m.in[k] = ins[k]->raw_data();
    st[k + 1] = broadcast_strides(ins[k]->shape(), ins[k]->strides(), shape);
    if (!packed) continue;
    if (!raw::is_contiguous(shape, st[k + 1])) {
      if (is_broadcast_row(shape, st[k + 1]) && shape.back() % V == 0) row_mask |= 1u << k;
      else packed = false;
    }
    packed = packed && aligned_to(m.in[k], V * in_sizes[k]);
  }
  if (!packed) {
    launch_strided<N>(shape, st, m);
    return;
  }
  m.row = row_mask ? shape.back() : 0;
  m.row_mask = row_mask;
  const int64_t packs = n / V;
  QKV_LAUNCH(blocks_for(packs > 0 ? packs : 1, kThreads), kThreads, 0, launch_stream(), packed_map_kernel<M>)(m, n);
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
