// How every kernel is launched, in a CUDA build and in an emulated one (QKV_CUDA_EMU, where
// device code is compiled as C++ and `<<<>>>` does not exist):
//
//   QKV_LAUNCH(grid, block, shared_bytes, stream, kernel)(args...);
//
// is `kernel<<<grid, block, shared_bytes, stream>>>(args...)` under nvcc, and runs the grid on the
// emulated device otherwise (tensor/cuda/emu/launch.h). `kernel` may name a template with its
// arguments, or leave them to be deduced from args. A kernel's dynamic shared memory is declared
// with QKV_DYNAMIC_SHARED(type, name): `extern __shared__` storage (16-byte aligned) under nvcc,
// the block's allocation of exactly the launch's size when emulated.
#pragma once

#ifdef QKV_CUDA_EMU
#include "tensor/cuda/emu/launch.h"

// The kernel's address when the site names one function or holds a pointer to it (the key of
// cudaFuncSetAttribute), else null. The argument z makes the test depend on the generic lambda's
// parameter, so a name whose template arguments are left to deduction tests false instead of
// failing to compile.
#define QKV_EMU_KERNEL_ADDRESS(...)                                              \
  ([=](auto z) -> const void* {                                                  \
    if constexpr (requires { ::qkv::cuda_emu::kernel_address(__VA_ARGS__, z); }) \
      return ::qkv::cuda_emu::kernel_address(__VA_ARGS__, z);                    \
    else return nullptr;                                                         \
  }(0))
#define QKV_LAUNCH(grid, block, shared_bytes, stream, ...)                                                           \
  ::qkv::cuda_emu::launcher(::qkv::cuda_emu::LaunchSite{dim3(grid), dim3(block), size_t(shared_bytes), (stream),     \
                                                        QKV_EMU_KERNEL_ADDRESS(__VA_ARGS__), #__VA_ARGS__, __FILE__, \
                                                        __LINE__},                                                   \
                            [=](auto... qkv_args) { __VA_ARGS__(qkv_args...); })
#define QKV_DYNAMIC_SHARED(type, name) type* const name = reinterpret_cast<type*>(::qkv::cuda_emu::dynamic_shared())
#else
#define QKV_LAUNCH(grid, block, shared_bytes, stream, ...) __VA_ARGS__<<<grid, block, shared_bytes, stream>>>
#define QKV_DYNAMIC_SHARED(type, name) extern __shared__ __align__(16) type name[]
#endif
