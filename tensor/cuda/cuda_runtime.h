// The tensor layer's CUDA side, callable from plain C++: device memory, transfers, and the
// strided copy/cast and fill that Tensor::copy_, contiguous() and to() need on a GPU.
// Defined in tensor/cuda/*.cu and cuda_allocator.cpp; only linked when QKV_HAVE_CUDA.
#pragma once
#include <cstddef>

namespace qkv {
class Tensor;
}

namespace qkv::cuda {

void memcpy_h2d(void* dst, const void* src, size_t bytes, int device);
void memcpy_d2h(void* dst, const void* src, size_t bytes, int device);
void memcpy_d2d(void* dst, int dst_device, const void* src, int src_device, size_t bytes);
// dst and src on the same CUDA device; src broadcasts to dst's shape; dtypes may differ.
void strided_copy(const Tensor& dst, const Tensor& src);
void fill(const Tensor& t, double value);
void synchronize(int device);

}  // namespace qkv::cuda
