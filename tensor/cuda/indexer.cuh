// Maps a flat element index to the element offsets of N operands on the device, from the merged
// shape/strides that make_strided_loop computes on the host. Shared by tensor/cuda and
// kernels/cuda so every strided CUDA kernel indexes the same way. Host code too: the index math
// is checked on the CPU (tests/kernels/test_cuda_index_math.cpp).
#pragma once
#include <cstdint>

#include "tensor/cuda/host_device.h"
#include "tensor/strided_loop.h"

namespace qkv::cuda {

inline constexpr int kMaxDims = 16;

// N is a size_t like StridedLoop's, so make_indexer can deduce it from a StridedLoop<N>.
template <size_t N> struct Indexer {
  int ndim = 0;
  int64_t shape[kMaxDims];
  int64_t strides[N][kMaxDims];

  QKV_HOST_DEVICE void offsets(int64_t linear, int64_t (&off)[N]) const {
    QKV_UNROLL
    for (size_t k = 0; k < N; ++k) off[k] = 0;
    for (int d = ndim - 1; d >= 0; --d) {
      const int64_t i = linear % shape[d];
      linear /= shape[d];
      QKV_UNROLL
      for (size_t k = 0; k < N; ++k) off[k] += i * strides[k][d];
    }
  }
};

template <size_t N> Indexer<N> make_indexer(const StridedLoop<N>& L) {
  Indexer<N> ix;
  ix.ndim = int(L.shape.size());
  for (int d = 0; d < ix.ndim; ++d) {
    ix.shape[d] = L.shape[d];
    for (size_t k = 0; k < N; ++k) ix.strides[k][d] = L.strides[k][d];
  }
  return ix;
}

inline unsigned blocks_for(int64_t n, int threads) {
  int64_t b = (n + threads - 1) / threads;
  return unsigned(b < 65535 * 32 ? b : 65535 * 32);  // grid-stride loops cover the rest
}

}  // namespace qkv::cuda
