// softmax and log_softmax along one dim, a row at a time, max-subtracted for stability.
#include <cmath>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/loops.h"
#include "kernels/layout.h"

namespace qkv::kernels::cpu {
namespace {

template <bool kLog> void softmax_impl(const KernelArgs& k, const char* op) {
  const int64_t dim = attr<DimAttrs>(k.attrs, op).dim;
  RowView rv(k.in[0], dim);
  Tensor y = rv.result_buffer(k.out[0]);
  visit_float(k.in[0].dtype(), op, [&]<class T>() {
    const T* x = rv.x.data<T>();
    T* o = y.data<T>();
    const int64_t n = rv.n;
#pragma omp parallel for schedule(static) if (rv.rows * n >= kParallelGrain)
    for (int64_t r = 0; r < rv.rows; ++r) {
      ConstArrMap<T> xr(x + r * n, n);
      ArrMap<T> yr(o + r * n, n);
      const T m = xr.maxCoeff();
      if (kLog) {
        const T lse = m + std::log((xr - m).exp().sum());
        yr = xr - lse;
      } else {
        yr = (xr - m).exp();
        yr /= yr.sum();
      }
    }
  });
  rv.write_back(y, k.out[0]);
}

}  // namespace

void softmax(const KernelArgs& k) { softmax_impl<false>(k, "softmax"); }
void log_softmax(const KernelArgs& k) { softmax_impl<true>(k, "log_softmax"); }

}  // namespace qkv::kernels::cpu
