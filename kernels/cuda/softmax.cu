// softmax and log_softmax CUDA kernels along one dim: one block per row (max, then the sum of
// exponentials, then the outputs), max-subtracted like kernels/cpu/softmax.cpp. A dim that is
// not last is moved last by RowView (kernels/layout.h), whose write_back copies the result into
// the output's layout.
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/layout.h"

namespace qkv::kernels::cuda {
namespace {

template <class T, bool kLog> __global__ void softmax_rows_kernel(const T* x, T* y, int64_t rows, int64_t n) {
  QKV_SHARED(T, smem, [kWarp]);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * n;
    T* yr = y + r * n;
    T m = neg_infinity<T>();
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) m = MaxOp{}(m, xr[i]);
    m = block_reduce(m, MaxOp{}, smem);
    T s = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += exp_(xr[i] - m);
    s = block_reduce(s, SumOp{}, smem);
    if constexpr (kLog) {
      const T lse = m + log_(s);
      for (int64_t i = threadIdx.x; i < n; i += blockDim.x) yr[i] = xr[i] - lse;
    } else {
      for (int64_t i = threadIdx.x; i < n; i += blockDim.x) yr[i] = exp_(xr[i] - m) / s;
    }
  }
}

template <bool kLog> void softmax_impl(const KernelArgs& k, const char* op) {
  const int64_t dim = attr<DimAttrs>(k.attrs, op).dim;
  const RowView rv(k.in[0], dim);
  const Tensor y = rv.result_buffer(k.out[0]);
  if (rv.rows == 0) return;
  visit_float(k.in[0].dtype(), op, [&]<class T>() {
    set_device(y);
    QKV_LAUNCH(row_blocks(rv.rows), row_threads(rv.n), 0, launch_stream(), softmax_rows_kernel<T, kLog>)
    (rv.x.data<T>(), y.data<T>(), rv.rows, rv.n);
    QKV_CUDA_LAUNCH_CHECK();
  });
  rv.write_back(y, k.out[0]);
}

}  // namespace

void softmax(const KernelArgs& k) { softmax_impl<false>(k, "softmax"); }
void log_softmax(const KernelArgs& k) { softmax_impl<true>(k, "log_softmax"); }

}  // namespace qkv::kernels::cuda
