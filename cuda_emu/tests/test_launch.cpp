// Launches on the emulated device: what the runtime refuses, and what a kernel with a missing
// barrier, a race between blocks, an early exit before a barrier or a read of unwritten dynamic
// or static shared memory runs into there. Compiled as emulated device code (cuda_emu/device.h
// first), as the kernels are.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "cuda_emu/error.h"

namespace {

using qkv::cuda_emu::KernelFault;

// Thread i writes 10 i to shared memory, then reads thread i + 1's slot.
template <bool kBarrier> __global__ void rotate(int* out) {
  CUDA_EMU_SHARED(int, slots, [64]);
  slots[threadIdx.x] = int(threadIdx.x) * 10;
  if constexpr (kBarrier) __syncthreads();
  out[blockIdx.x * blockDim.x + threadIdx.x] = slots[(threadIdx.x + 1) % blockDim.x];
}

__global__ void exit_before_barrier(int* out) {
  if (threadIdx.x == 3) return;
  __syncthreads();
  out[threadIdx.x] = 1;
}

__global__ void read_dynamic_shared(float* out) {
  CUDA_EMU_DYNAMIC_SHARED(float, buf);
  out[threadIdx.x] = buf[threadIdx.x];
}

// Each block reads its static shared slot before writing it: NaN in every block, never what the
// block before it left.
__global__ void read_static_shared(float* out) {
  CUDA_EMU_SHARED(float, slot, [32]);
  out[blockIdx.x * 32 + threadIdx.x] = slot[threadIdx.x];
  slot[threadIdx.x] = float(blockIdx.x);
}

// Every block writes its index to the same word: the last block to run wins.
__global__ void last_block_wins(int* out) {
  if (threadIdx.x == 0) out[0] = int(blockIdx.x);
}

// Block b reads what block b - 1 wrote: only right when blocks run in order.
__global__ void read_previous_block(int* out) {
  if (threadIdx.x == 0) out[blockIdx.x + 1] = out[blockIdx.x] + 1;
}

__global__ void nothing(int*) {}

template <class T> T* device_array(size_t n) {
  void* p = nullptr;
  REQUIRE(cudaMalloc(&p, n * sizeof(T)) == cudaSuccess);
  REQUIRE(cudaMemset(p, 0, n * sizeof(T)) == cudaSuccess);
  return static_cast<T*>(p);
}

template <class T> std::vector<T> to_host(const T* device, size_t n) {
  std::vector<T> host(n);
  REQUIRE(cudaMemcpy(host.data(), device, n * sizeof(T), cudaMemcpyDeviceToHost) == cudaSuccess);
  return host;
}

}  // namespace

TEST_CASE("emulated launch: a missing barrier makes the result depend on the order of the threads") {
  int* out = device_array<int>(128);
  CUDA_EMU_LAUNCH(2, 64, 0, nullptr, rotate<true>)(out);
  REQUIRE(cudaGetLastError() == cudaSuccess);
  const std::vector<int> got = to_host(out, 128);
  for (int i = 0; i < 128; ++i) CHECK(got[size_t(i)] == (i % 64 + 1) % 64 * 10);
  if (qkv::cuda_emu::schedules() > 1)
    CHECK_THROWS_WITH_AS(CUDA_EMU_LAUNCH(2, 64, 0, nullptr, rotate<false>)(out),
                         doctest::Contains("its result depends on the order of its threads"), KernelFault);
  cudaFree(out);
}

TEST_CASE("emulated launch: blocks run in shuffled orders, so a race between blocks is a fault") {
  if (qkv::cuda_emu::schedules() < 2) return;
  int* out = device_array<int>(9);
  CHECK_THROWS_WITH_AS(CUDA_EMU_LAUNCH(8, 32, 0, nullptr, last_block_wins)(out),
                       doctest::Contains("depends on the order of its threads or blocks"), KernelFault);
  CHECK_THROWS_WITH_AS(CUDA_EMU_LAUNCH(8, 32, 0, nullptr, read_previous_block)(out),
                       doctest::Contains("last to first differs from first to last"), KernelFault);
  cudaFree(out);
}

TEST_CASE("emulated launch: a thread that exits before a barrier the others wait at is named") {
  int* out = device_array<int>(32);
  CHECK_THROWS_WITH_AS(CUDA_EMU_LAUNCH(1, 32, 0, nullptr, exit_before_barrier)(out),
                       doctest::Contains("left without reaching"), KernelFault);
  cudaFree(out);
}

TEST_CASE("emulated launch: dynamic shared memory starts as NaN, sized by the launch") {
  float* out = device_array<float>(64);
  CUDA_EMU_LAUNCH(1, 64, 64 * sizeof(float), nullptr, read_dynamic_shared)(out);
  REQUIRE(cudaGetLastError() == cudaSuccess);
  for (float x : to_host(out, 64)) CHECK(std::isnan(x));
  cudaFree(out);
}

TEST_CASE("emulated launch: static shared memory is NaN when each block starts, not the last block's") {
  float* out = device_array<float>(4 * 32);
  CUDA_EMU_LAUNCH(4, 32, 0, nullptr, read_static_shared)(out);
  REQUIRE(cudaGetLastError() == cudaSuccess);
  for (float x : to_host(out, 4 * 32)) CHECK(std::isnan(x));
  cudaFree(out);
}

TEST_CASE("emulated launch: configurations the CUDA runtime refuses are the launch's error") {
  int* out = device_array<int>(1);
  CUDA_EMU_LAUNCH(1, 2048, 0, nullptr, nothing)(out);  // more than 1024 threads
  CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration);
  CUDA_EMU_LAUNCH(0, 32, 0, nullptr, nothing)(out);  // an empty grid
  CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration);
  const size_t big = size_t(64) << 10;
  CUDA_EMU_LAUNCH(1, 32, big, nullptr, nothing)(out);  // over 48 KB without the attribute
  CHECK(cudaGetLastError() == cudaErrorInvalidValue);
  REQUIRE(cudaFuncSetAttribute(nothing, cudaFuncAttributeMaxDynamicSharedMemorySize, int(big)) == cudaSuccess);
  CUDA_EMU_LAUNCH(1, 32, big, nullptr, nothing)(out);
  CHECK(cudaGetLastError() == cudaSuccess);
  CUDA_EMU_LAUNCH(1, 32, size_t(228) << 10, nullptr, nothing)(out);  // over sm_90's 227 KB
  CHECK(cudaGetLastError() == cudaErrorInvalidValue);
  cudaFree(out);
}
