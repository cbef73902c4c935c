// Strided copy with dtype conversion and fill on one CUDA device: what contiguous(), to() and
// copy_() need. Grid-stride loops over the destination's elements.
#include "tensor/convert.h"
#include "tensor/cuda/check.h"
#include "tensor/cuda/cuda_runtime.h"
#include "tensor/cuda/indexer.cuh"
#include "tensor/cuda/kernel_launch.h"
#include "tensor/cuda/stream.h"
#include "tensor/tensor.h"

namespace qkv::cuda {
namespace {

constexpr int kThreads = 256;

template <class D, class S> __global__ void copy_kernel(D* dst, const S* src, Indexer<2> ix, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t off[2];
    ix.offsets(i, off);
    dst[off[0]] = convert<D>(src[off[1]]);
  }
}

template <class D> __global__ void fill_kernel(D* dst, D value, Indexer<1> ix, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t off[1];
    ix.offsets(i, off);
    dst[off[0]] = value;
  }
}

}  // namespace

void strided_copy(const Tensor& dst, const Tensor& src) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  QKV_CUDA_CHECK(cudaSetDevice(dst.device().index));
  auto L =
      make_strided_loop<2>(dst.shape(), {dst.strides(), broadcast_strides(src.shape(), src.strides(), dst.shape())});
  auto ix = make_indexer(L);
  visit_dtype(dst.dtype(), [&]<class D>() {
    visit_dtype(src.dtype(), [&]<class S>() {
      QKV_LAUNCH(blocks_for(n, kThreads), kThreads, 0, ::qkv::cuda::current_stream(), copy_kernel<D, S>)
      (static_cast<D*>(dst.raw_data()), static_cast<const S*>(src.raw_data()), ix, n);
    });
  });
  QKV_CUDA_LAUNCH_CHECK();
}

void fill(const Tensor& t, double value) {
  const int64_t n = t.numel();
  if (n == 0) return;
  QKV_CUDA_CHECK(cudaSetDevice(t.device().index));
  auto ix = make_indexer(make_strided_loop<1>(t.shape(), {t.strides()}));
  visit_dtype(t.dtype(), [&]<class D>() {
    QKV_LAUNCH(blocks_for(n, kThreads), kThreads, 0, ::qkv::cuda::current_stream(), fill_kernel<D>)
    (static_cast<D*>(t.raw_data()), convert<D>(value), ix, n);
  });
  QKV_CUDA_LAUNCH_CHECK();
}

}  // namespace qkv::cuda
