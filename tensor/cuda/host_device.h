// QKV_HOST_DEVICE marks index arithmetic that CUDA kernels run and host tests check: under nvcc
// it is __host__ __device__ (inlined), in plain C++ just inline.
#pragma once

#ifdef __CUDACC__
#define QKV_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define QKV_HOST_DEVICE inline
#endif
