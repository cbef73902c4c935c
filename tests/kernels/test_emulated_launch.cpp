// Launches on the emulated device (built with QKV_CUDA_EMU only): what the runtime refuses, and
// what a kernel with a missing barrier, an early exit before a barrier or a read of unwritten
// dynamic shared memory runs into there.
#include "tensor/cuda/emu/device.h"
// (first: device code below uses what it defines)
#include <doctest/doctest.h>

#include <cmath>

#include "tensor/cuda/kernel_launch.h"
#include "tensor/error.h"

namespace {

// Thread i writes 10 i to shared memory, then reads thread i + 1's slot.
template <bool kBarrier> __global__ void rotate(int* out) {
  __shared__ int slots[64];
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
  QKV_DYNAMIC_SHARED(float, buf);
  out[threadIdx.x] = buf[threadIdx.x];
}

__global__ void nothing(int*) {}

template <class T> T* device_array(size_t n) {
  void* p = nullptr;
  REQUIRE(cudaMalloc(&p, n * sizeof(T)) == cudaSuccess);
  return static_cast<T*>(p);
}

}  // namespace

TEST_CASE("emulated launch: a missing barrier makes the result depend on the order of the threads") {
  int* out = device_array<int>(128);
  QKV_LAUNCH(2, 64, 0, nullptr, rotate<true>)(out);
  REQUIRE(cudaGetLastError() == cudaSuccess);
  for (int i = 0; i < 128; ++i) CHECK(out[i] == (i % 64 + 1) % 64 * 10);
  if (qkv::cuda_emu::schedules() > 1)
    CHECK_THROWS_WITH_AS(QKV_LAUNCH(2, 64, 0, nullptr, rotate<false>)(out),
                         doctest::Contains("its result depends on the order of its threads"), qkv::DeviceError);
  cudaFree(out);
}

TEST_CASE("emulated launch: a thread that exits before a barrier the others wait at is named") {
  int* out = device_array<int>(32);
  CHECK_THROWS_WITH_AS(QKV_LAUNCH(1, 32, 0, nullptr, exit_before_barrier)(out),
                       doctest::Contains("left without reaching"), qkv::DeviceError);
  cudaFree(out);
}

TEST_CASE("emulated launch: dynamic shared memory starts as NaN, sized by the launch") {
  float* out = device_array<float>(64);
  QKV_LAUNCH(1, 64, 64 * sizeof(float), nullptr, read_dynamic_shared)(out);
  REQUIRE(cudaGetLastError() == cudaSuccess);
  for (int i = 0; i < 64; ++i) CHECK(std::isnan(out[i]));
  cudaFree(out);
}

TEST_CASE("emulated launch: configurations the CUDA runtime refuses are the launch's error") {
  int* out = device_array<int>(1);
  QKV_LAUNCH(1, 2048, 0, nullptr, nothing)(out);  // more than 1024 threads
  CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration);
  QKV_LAUNCH(0, 32, 0, nullptr, nothing)(out);  // an empty grid
  CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration);
  const size_t big = size_t(64) << 10;
  QKV_LAUNCH(1, 32, big, nullptr, nothing)(out);  // over 48 KB without the attribute
  CHECK(cudaGetLastError() == cudaErrorInvalidValue);
  REQUIRE(cudaFuncSetAttribute(nothing, cudaFuncAttributeMaxDynamicSharedMemorySize, int(big)) == cudaSuccess);
  QKV_LAUNCH(1, 32, big, nullptr, nothing)(out);
  CHECK(cudaGetLastError() == cudaSuccess);
  QKV_LAUNCH(1, 32, size_t(228) << 10, nullptr, nothing)(out);  // over sm_90's 227 KB
  CHECK(cudaGetLastError() == cudaErrorInvalidValue);
  cudaFree(out);
}
