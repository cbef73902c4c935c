// How every kernel is launched, in a CUDA build and in an emulated one (QKV_CUDA_EMU, where
// device code is compiled as C++ and `<<<>>>` does not exist):
//
//   QKV_LAUNCH(grid, block, shared_bytes, stream, kernel)(args...);
//
// is `kernel<<<grid, block, shared_bytes, stream>>>(args...)` under nvcc, and runs the grid on the
// emulated device otherwise (cuda_emu/launch.h, which the emulated build's -include gives every
// .cu file). `kernel` may name a template with its arguments, or leave them to be deduced from
// args. A kernel's dynamic shared memory is declared with QKV_DYNAMIC_SHARED(type, name):
// `extern __shared__` storage (16-byte aligned) under nvcc, the block's allocation of exactly the
// launch's size when emulated. Static shared memory is QKV_SHARED(type, name, [dims]):
// `__shared__ type name[dims]` under nvcc; emulated, NaN in every byte when a block first reaches
// the declaration, as dynamic shared memory is.
#pragma once

#ifdef QKV_CUDA_EMU  // cuda_emu/launch.h, from the emulated build's -include
#define QKV_LAUNCH(grid, block, shared_bytes, stream, ...) \
  CUDA_EMU_LAUNCH(grid, block, shared_bytes, stream, __VA_ARGS__)
#define QKV_DYNAMIC_SHARED(type, name) CUDA_EMU_DYNAMIC_SHARED(type, name)
#define QKV_SHARED(type, name, dims) CUDA_EMU_SHARED(type, name, dims)
#else
#define QKV_LAUNCH(grid, block, shared_bytes, stream, ...) __VA_ARGS__<<<grid, block, shared_bytes, stream>>>
#define QKV_DYNAMIC_SHARED(type, name) extern __shared__ __align__(16) type name[]
#define QKV_SHARED(type, name, dims) __shared__ type name dims
#endif
