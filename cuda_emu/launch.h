// Kernel launches on the emulated device (QKV_CUDA_EMU): QKV_LAUNCH (tensor/cuda/kernel_launch.h)
// turns `kernel<<<grid, block, smem, stream>>>(args...)` into launcher(site, kernel)(args...),
// which runs every block of the grid, one after another on the calling thread, each as a fiber
// block (cuda_emu/block.h) whose threads see their own threadIdx, blockIdx, blockDim and
// gridDim (cuda_emu/device.h).
//
// What a launch checks, as the CUDA runtime or a GPU would: the grid and block limits (an
// invalid configuration is the launch's error, read by cudaGetLastError), dynamic shared memory
// over 48 KB without cudaFuncSetAttribute(MaxDynamicSharedMemorySize) or over 227 KB. Dynamic
// shared memory is a fresh allocation of exactly the launch's size per block, every byte 0xff (a
// NaN in every floating type), so AddressSanitizer sees a read past it and a kernel that reads
// before it writes produces NaN; so is every static __shared__ array (QKV_SHARED) when a block
// first uses it. Each launch runs under `schedules()` orders (forward, reverse, a seeded shuffle;
// QKV_EMU_SCHEDULES, default 3), of the block's threads and of the grid's blocks alike, and its
// asynchronous work completes at the points each order chooses (cuda_emu/block.h): device memory
// is restored between them and must come out bit-identical, or the launch throws a KernelFault
// naming the site and the first differing byte (a missing barrier, a race between blocks, a read
// of an asynchronous result not waited for). A launch whose float or double atomics ran in a
// different order may differ legitimately; its comparison is skipped. Device memory is host-
// accessible only while a launch runs (cuda_emu/device_memory.h).
//
// With QKV_EMU_COVERAGE=<folder>, each process writes there, at exit, one line per kernel it
// launched: its launch site's file, the kernel as written there, its instantiation (the mangled
// type of the launching lambda), and whether it ran with one warp or several per block and one
// block or several (scripts/emu-coverage.py reads them).
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>
#include <tuple>
#include <type_traits>
#include <typeinfo>
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
  const char* instance = nullptr;  // the launching lambda's mangled type: which instantiation ran
};

// Inside a running block: the calling thread's coordinates, and the block's dynamic shared memory.
uint3 thread_idx();
uint3 block_idx();
dim3 block_dim();
dim3 grid_dim();
unsigned char* dynamic_shared();
// QKV_SHARED's emulated half: NaN-fills the static __shared__ array [p, p + bytes) the first
// time each block reaches its declaration.
void fresh_static_shared(void* p, size_t bytes);
// A floating atomic ran: the launch's result may depend on the order of its threads.
void note_order_dependent();
// How many thread orders each launch runs under (1 to 3).
int schedules();

// Runs (or, while `site.stream` captures a graph, records) the launch; `thread` runs one thread.
void run_grid(const LaunchSite& site, std::function<void()> thread);

template <class Kernel> struct Launcher {
  LaunchSite site;
  Kernel kernel;
  template <class... Args> void operator()(Args&&... args) {
    site.instance = typeid(Kernel).name();
    // The arguments are copied once, like a launch's parameter buffer; every thread gets its own
    // copy of each when it calls the kernel.
    auto call = [k = kernel, params = std::tuple<std::decay_t<Args>...>(std::forward<Args>(args)...)] {
      std::apply([&](const auto&... p) { k(p...); }, params);
    };
    run_grid(site, std::move(call));
  }
};
// What CUDA_EMU_KERNEL_ADDRESS calls.
template <class F, class Z> const void* kernel_address(F* kernel, Z) { return reinterpret_cast<const void*>(kernel); }

template <class Kernel> Launcher<Kernel> launcher(const LaunchSite& site, Kernel kernel) { return {site, kernel}; }

}  // namespace qkv::cuda_emu

// The kernel's address when the site names one function or holds a pointer to it (the key of
// cudaFuncSetAttribute), else null. The argument z makes the test depend on the generic lambda's
// parameter, so a name whose template arguments are left to deduction tests false instead of
// failing to compile.
#define CUDA_EMU_KERNEL_ADDRESS(...)                                             \
  ([=](auto z) -> const void* {                                                  \
    if constexpr (requires { ::qkv::cuda_emu::kernel_address(__VA_ARGS__, z); }) \
      return ::qkv::cuda_emu::kernel_address(__VA_ARGS__, z);                    \
    else return nullptr;                                                         \
  }(0))
// `kernel<<<grid, block, shared_bytes, stream>>>(args...)` is
// CUDA_EMU_LAUNCH(grid, block, shared_bytes, stream, kernel)(args...) here.
#define CUDA_EMU_LAUNCH(grid, block, shared_bytes, stream, ...)                                                       \
  ::qkv::cuda_emu::launcher(::qkv::cuda_emu::LaunchSite{dim3(grid), dim3(block), size_t(shared_bytes), (stream),      \
                                                        CUDA_EMU_KERNEL_ADDRESS(__VA_ARGS__), #__VA_ARGS__, __FILE__, \
                                                        __LINE__},                                                    \
                            [=](auto... qkv_args) { __VA_ARGS__(qkv_args...); })
// `extern __shared__ type name[]`: the block's dynamic shared memory.
#define CUDA_EMU_DYNAMIC_SHARED(type, name) \
  type* const name = reinterpret_cast<type*>(::qkv::cuda_emu::dynamic_shared())
// `__shared__ type name dims`: one copy per OS thread, NaN when each block first reaches it.
#define CUDA_EMU_SHARED(type, name, dims) \
  static thread_local type name dims;     \
  ::qkv::cuda_emu::fresh_static_shared(name, sizeof(name))
