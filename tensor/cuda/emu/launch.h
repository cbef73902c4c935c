// Kernel launches on the emulated device (QKV_CUDA_EMU): QKV_LAUNCH (tensor/cuda/launch.h)
// turns `kernel<<<grid, block, smem, stream>>>(args...)` into launcher(site, kernel)(args...),
// which runs every block of the grid, one after another on the calling thread, each as a fiber
// block (tensor/cuda/emu/block.h) whose threads see their own threadIdx, blockIdx, blockDim and
// gridDim (tensor/cuda/emu/device.h).
//
// What a launch checks, as the CUDA runtime or a GPU would: the grid and block limits (an
// invalid configuration is the launch's error, read by cudaGetLastError), dynamic shared memory
// over 48 KB without cudaFuncSetAttribute(MaxDynamicSharedMemorySize) or over 227 KB. Dynamic
// shared memory is a fresh allocation of exactly the launch's size per block, every byte 0xff (a
// NaN in every floating type), so AddressSanitizer sees a read past it and a kernel that reads
// before it writes produces NaN. Each launch runs under `schedules()` thread orders (forward,
// reverse, a seeded shuffle; QKV_EMU_SCHEDULES, default 3): device memory is restored between
// them and must come out bit-identical, or the launch throws naming the site and the first
// differing byte (a missing barrier). A launch whose float or double atomics ran in a different
// order may differ legitimately; its comparison is skipped.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>

namespace qkv::cuda_emu {

// Where and how a kernel was launched.
struct LaunchSite {
  dim3 grid, block;
  size_t shared_bytes;
  cudaStream_t stream;
  const void* kernel;  // the kernel's address when the site names it fully, else null
  const char* name;    // the kernel as written at the site
  const char* file;
  int line;
};

// Inside a running block: the calling thread's coordinates, and the block's dynamic shared memory.
uint3 thread_idx();
uint3 block_idx();
dim3 block_dim();
dim3 grid_dim();
unsigned char* dynamic_shared();
// A floating atomic ran: the launch's result may depend on the order of its threads.
void note_order_dependent();
// How many thread orders each launch runs under (1 to 3).
int schedules();

// Runs (or, while `site.stream` captures a graph, records) the launch; `thread` runs one thread.
void run_grid(const LaunchSite& site, std::function<void()> thread);

template <class Kernel> struct Launcher {
  LaunchSite site;
  Kernel kernel;
  template <class... Args> void operator()(Args&&... args) const {
    // The arguments are copied once, like a launch's parameter buffer; every thread gets its own
    // copy of each when it calls the kernel.
    auto call = [k = kernel, params = std::tuple<std::decay_t<Args>...>(std::forward<Args>(args)...)] {
      std::apply([&](const auto&... p) { k(p...); }, params);
    };
    run_grid(site, std::move(call));
  }
};
// What QKV_EMU_KERNEL_ADDRESS calls (tensor/cuda/kernel_launch.h).
template <class F, class Z> const void* kernel_address(F* kernel, Z) { return reinterpret_cast<const void*>(kernel); }

template <class Kernel> Launcher<Kernel> launcher(const LaunchSite& site, Kernel kernel) { return {site, kernel}; }

}  // namespace qkv::cuda_emu
