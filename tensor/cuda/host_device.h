// QKV_HOST_DEVICE marks index arithmetic that CUDA kernels run and host tests check: under nvcc
// it is __host__ __device__ (inlined), in plain C++ just inline; QKV_UNROLL likewise asks nvcc
// to unroll a loop and means nothing to a host compiler.
#pragma once

#ifdef __CUDACC__
#define QKV_HOST_DEVICE __host__ __device__ __forceinline__
#define QKV_UNROLL _Pragma("unroll")
#else
#define QKV_HOST_DEVICE inline
#define QKV_UNROLL
#endif
