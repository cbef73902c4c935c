// One caching allocator per CUDA device. With QKV_CUDA_EXACT_ALLOC=1 every tensor gets a
// cudaMalloc of exactly its size, freed when the tensor dies (no rounding, no reuse), so
// compute-sanitizer sees every overrun past a tensor's end and every use after free. On the
// emulated device (QKV_CUDA_EMU) allocations are always exact.
#include <cuda_runtime_api.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "tensor/allocator.h"
#include "tensor/cuda/check.h"
#include "tensor/cuda/cuda_runtime.h"

namespace qkv {

namespace {

// nullptr when the device is out of memory (the caching allocator then frees its cache and
// retries); any other failure is an earlier kernel's sticky error, reported as what it is.
void* device_alloc(size_t bytes, int device) {
  void* p = nullptr;
  QKV_CUDA_CHECK(cudaSetDevice(device));
  const cudaError_t err = cudaMalloc(&p, bytes);
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // out of memory is not sticky: clear it
    return nullptr;
  }
  if (err != cudaSuccess)
    throw DeviceError(cat("cudaMalloc of ", bytes, " bytes on cuda:", device, " failed: ", cudaGetErrorName(err), ": ",
                          cudaGetErrorString(err),
                          " (an earlier kernel failed; run with QKV_CUDA_SYNC=1 to stop at the op that failed)"));
  return p;
}
void device_free(void* p, int device) {
  cudaSetDevice(device);
  cudaFree(p);
}

bool exact_allocations() {
#ifdef QKV_CUDA_EMU
  return true;  // one emulated allocation per tensor: AddressSanitizer sees each tensor's end
#endif
  const char* v = std::getenv("QKV_CUDA_EXACT_ALLOC");
  return v && *v && std::strcmp(v, "0") != 0;
}

}  // namespace

Allocator& cuda_allocator(int device) {
  // 512-byte blocks, like cudaMalloc's own granularity; never destroyed (freed at process exit).
  static std::once_flag once;
  static std::vector<CachingAllocator*>* per_device = nullptr;
  std::call_once(once, [] {
    per_device = new std::vector<CachingAllocator*>();
    const bool exact = exact_allocations();
    for (int d = 0; d < cuda_device_count(); ++d)
      per_device->push_back(
          new CachingAllocator(Device(DeviceType::cuda, d), RawMemory{device_alloc, device_free}, 512, exact));
  });
  return *per_device->at(size_t(device));
}

}  // namespace qkv
