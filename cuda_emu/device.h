// What nvcc gives device code and the host compiler does not, for an emulated build
// (QKV_CUDA_EMU): included first in every .cu file (-include, by the one CMake switch that
// selects the emulator: cmake/cuda.cmake), which then compiles as C++ and runs on the emulated
// device (cuda_emu/launch.h). Nothing else includes the emulator's headers.
//   - threadIdx, blockIdx, blockDim, gridDim: the running fiber's and its block's.
//   - static shared memory, declared with QKV_SHARED (tensor/cuda/kernel_launch.h): static
//     thread_local, NaN-filled when each block first reaches it. The OS thread runs one block at
//     a time and all the block's threads are fibers on it, so they share one copy, as a block
//     does. A plain __shared__ declaration does not compile here.
//   - __syncthreads: the block's barrier; the warp shuffles and votes come from warp_shuffle.h,
//     ldmatrix and mma.sync from warp_matrix.h, the sm_90 instructions (mbarrier, the bulk
//     tensor copy, wgmma, named barriers, setmaxnreg, the proxy fence) from their models, which
//     the kernels' `#ifdef QKV_CUDA_EMU` branches call; __cvta_generic_to_shared gives the
//     block's shared window address (cuda_emu/shared_memory.h); CUB's radix sort is cub_sort.h.
//   - atomics as atomic read-modify-writes; float and double adds also mark the launch as one
//     whose result may depend on the order of its threads.
//   - the rounding intrinsics (__fadd_rn ...) as plain IEEE operations in round-to-nearest,
//     __expf as expf, the memory fences as fences.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math_constants.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>

#include "cuda_emu/block.h"
#include "cuda_emu/cub_sort.h"
#include "cuda_emu/launch.h"
#include "cuda_emu/mbarrier.h"
#include "cuda_emu/shared_memory.h"
#include "cuda_emu/tensor_copy.h"
#include "cuda_emu/warp_matrix.h"
#include "cuda_emu/warp_shuffle.h"
#include "cuda_emu/warpgroup_sync.h"
#include "cuda_emu/wgmma.h"

// Device code is being compiled for the emulated device (what __CUDACC__ says under nvcc).
#define QKV_CUDA_EMU_DEVICE 1

#undef __shared__
#define __shared__ QKV_SHARED_declares_static_shared_memory
#undef __launch_bounds__
#define __launch_bounds__(...)
#undef __grid_constant__
#define __grid_constant__

#define threadIdx (::qkv::cuda_emu::thread_idx())
#define blockIdx (::qkv::cuda_emu::block_idx())
#define blockDim (::qkv::cuda_emu::block_dim())
#define gridDim (::qkv::cuda_emu::grid_dim())

inline void __syncthreads() { ::qkv::cuda_emu::sync_threads(); }
inline uint32_t __cvta_generic_to_shared(const void* p) {
  return ::qkv::cuda_emu::shared_address(p, 1, "__cvta_generic_to_shared");
}
inline void __threadfence_system() { std::atomic_thread_fence(std::memory_order_seq_cst); }

// ---- atomics ------------------------------------------------------------------------------------

template <class T> T atomicAdd(T* p, T v) {
  if constexpr (std::is_floating_point_v<T>) ::qkv::cuda_emu::note_order_dependent();
  return std::atomic_ref<T>(*p).fetch_add(v);
}
template <class T> T atomicCAS(T* p, T expected, T desired) {
  std::atomic_ref<T>(*p).compare_exchange_strong(expected, desired);
  return expected;  // the old value either way
}
// ---- arithmetic intrinsics ----------------------------------------------------------------------

inline float __expf(float x) { return std::exp(x); }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fsqrt_rn(float x) { return std::sqrt(x); }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __ddiv_rn(double a, double b) { return a / b; }
inline double __dsqrt_rn(double x) { return std::sqrt(x); }
inline float __int_as_float(int x) { return std::bit_cast<float>(x); }
inline double __longlong_as_double(long long x) { return std::bit_cast<double>(x); }
inline int __float2int_rn(float x) { return int(std::nearbyint(x)); }
using std::isfinite;
using std::max;
using std::min;

// The runtime's overload for a kernel's address (cuda_runtime.h declares it for nvcc only).
template <class T> cudaError_t cudaFuncSetAttribute(T* kernel, cudaFuncAttribute attr, int value) {
  return ::cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel), attr, value);
}
