// The emulated device's state that launches need from the runtime (tensor/cuda/emu/runtime.cpp):
// the memory kernels can write (every cudaMalloc and cudaHostAlloc, each an allocation of exactly
// its size), graph capture, the launch error cudaGetLastError returns, and the kernels' attributes.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace qkv::cuda_emu {

// A copy of every live device and mapped host allocation.
struct MemorySnapshot {
  struct Region {
    const void* data;
    std::vector<unsigned char> bytes;
  };
  std::vector<Region> regions;
};
MemorySnapshot snapshot_memory();
void restore_memory(const MemorySnapshot& s);
// Where memory now differs from `s` ("byte 12 of a 4096-byte allocation"), empty when it does not.
std::string first_difference(const MemorySnapshot& s);

// The work recorded in place of running it while `stream` captures a graph; null when it does not.
std::vector<std::function<void()>>* capture_of(cudaStream_t stream);

// What the next cudaGetLastError returns (the first error since the last call).
void set_launch_error(cudaError_t e);
// The kernel's cudaFuncAttributeMaxDynamicSharedMemorySize (0 when never set).
int max_dynamic_shared(const void* kernel);

}  // namespace qkv::cuda_emu
