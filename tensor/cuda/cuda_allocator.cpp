// CUDA devices: discovery, one caching allocator per device, transfers.
#include <cuda_runtime_api.h>

#include <memory>
#include <mutex>
#include <vector>

#include "tensor/allocator.h"
#include "tensor/cuda/check.h"
#include "tensor/cuda/cuda_runtime.h"

namespace qkv {

bool cuda_compiled() { return true; }

int cuda_device_count() {
  static const int count = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      cudaGetLastError();  // no driver or no device: clear the sticky error, report zero
      return 0;
    }
    return n;
  }();
  return count;
}

namespace {
void* device_alloc(size_t bytes, int device) {
  void* p = nullptr;
  if (cudaSetDevice(device) != cudaSuccess || cudaMalloc(&p, bytes) != cudaSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  return p;
}
void device_free(void* p, int device) {
  cudaSetDevice(device);
  cudaFree(p);
}
}  // namespace

Allocator& cuda_allocator(int device) {
  // 512-byte blocks, like cudaMalloc's own granularity; never destroyed (freed at process exit).
  static std::once_flag once;
  static std::vector<CachingAllocator*>* per_device = nullptr;
  std::call_once(once, [] {
    per_device = new std::vector<CachingAllocator*>();
    for (int d = 0; d < cuda_device_count(); ++d)
      per_device->push_back(
          new CachingAllocator(Device(DeviceType::cuda, d), RawMemory{device_alloc, device_free}, 512));
  });
  return *per_device->at(size_t(device));
}

namespace cuda {

void memcpy_h2d(void* dst, const void* src, size_t bytes, int device) {
  QKV_CUDA_CHECK(cudaSetDevice(device));
  QKV_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
}
void memcpy_d2h(void* dst, const void* src, size_t bytes, int device) {
  QKV_CUDA_CHECK(cudaSetDevice(device));
  QKV_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}
void memcpy_d2d(void* dst, int dst_device, const void* src, int src_device, size_t bytes) {
  QKV_CUDA_CHECK(cudaMemcpyPeer(dst, dst_device, src, src_device, bytes));
}
void synchronize(int device) {
  QKV_CUDA_CHECK(cudaSetDevice(device));
  QKV_CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace cuda
}  // namespace qkv
