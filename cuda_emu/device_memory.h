// The emulated device's memory and the runtime state launches need (cuda_emu/runtime.cpp).
//
// Device memory is not host memory on a GPU, and here it is not either: every cudaMalloc gets
// whole pages of an arena that is readable and writable only while the emulator works on it (a
// kernel, a runtime copy, cuBLASLt, CUB's sort: each holds a DeviceAccess). A host read or write
// of a device pointer anywhere else faults (SIGSEGV), reported with the address as a host access
// of device memory, as a GPU would refuse it. Under AddressSanitizer the bytes past an
// allocation's end, up to its last page, are poisoned, so a kernel that runs past a tensor stops
// at its first byte; freed memory is poisoned until it is handed out again.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace qkv::cuda_emu {

// (Re)installs the report of host accesses to device memory in front of the SIGSEGV handler
// installed now, which it then calls. Each launch does this, so a handler installed since (a
// test framework's) still comes second.
void install_host_access_report();

// While one lives (on any thread; they nest), device memory is host-accessible.
class DeviceAccess {
 public:
  DeviceAccess();
  ~DeviceAccess();
  DeviceAccess(const DeviceAccess&) = delete;
  DeviceAccess& operator=(const DeviceAccess&) = delete;
};

// cudaMalloc's and cudaFree's memory: null when the arena is full.
void* device_allocate(size_t bytes);
// False when p is not the start of a live allocation.
bool device_free(void* p);
// Whether [p, p + bytes) lies in one live device allocation.
bool is_device_memory(const void* p, size_t bytes);

// Mapped pinned host memory (cudaHostAlloc with cudaHostAllocMapped): kernels write it too, so
// snapshots include it.
void register_mapped_host(const void* p, size_t bytes);
void unregister_mapped_host(const void* p);

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
