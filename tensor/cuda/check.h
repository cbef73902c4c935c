// Turns CUDA runtime errors into qkv::DeviceError naming the call and where it failed.
#pragma once
#include <cuda_runtime_api.h>

#include "tensor/error.h"

#define QKV_CUDA_CHECK(expr)                                                                                         \
  do {                                                                                                               \
    cudaError_t qkv_err_ = (expr);                                                                                   \
    if (qkv_err_ != cudaSuccess)                                                                                     \
      throw ::qkv::DeviceError(                                                                                      \
          ::qkv::cat("CUDA error in ", #expr, " at ", __FILE__, ":", __LINE__, ": ", cudaGetErrorString(qkv_err_))); \
  } while (0)

// After a kernel launch: reports bad launch configurations immediately.
#define QKV_CUDA_LAUNCH_CHECK() QKV_CUDA_CHECK(cudaGetLastError())
