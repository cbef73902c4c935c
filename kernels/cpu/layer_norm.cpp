// Fused layer norm over the last dim, with optional affine weight and bias. The forward saves
// the per-row mean and 1/std; the backward kernel produces dx, dweight and dbias in one pass
// over the rows (per-thread partial sums for the parameter gradients).
#include <cmath>
#include <omp.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/layer_norm_row.h"
#include "kernels/cpu/loops.h"
#include "tensor/view.h"

namespace qkv::kernels::cpu {

// Inputs (x, weight?, bias?) -> outputs (y, mean, rstd).
void layer_norm(const KernelArgs& k) {
  const double eps = attr<LayerNormAttrs>(k.attrs, "layer_norm").eps;
  const Tensor x = raw::contiguous(k.in[0]);
  const Tensor w = k.in[1].defined() ? raw::contiguous(k.in[1]) : Tensor();
  const Tensor b = k.in[2].defined() ? raw::contiguous(k.in[2]) : Tensor();
  visit_float(x.dtype(), "layer_norm", [&]<class T>() {
    const int64_t n = x.dim() ? x.shape().back() : 1, rows = n ? x.numel() / n : 0;
    const T* xp = x.data<T>();
    T* y = k.out[0].data<T>();
    T* mean = k.out[1].data<T>();
    T* rstd = k.out[2].data<T>();
    const T* wp = w.defined() ? w.data<T>() : nullptr;
    const T* bp = b.defined() ? b.data<T>() : nullptr;
#pragma omp parallel for schedule(static) if (rows * n >= kParallelGrain)
    for (int64_t r = 0; r < rows; ++r) layer_norm_row(xp + r * n, y + r * n, n, eps, wp, bp, mean[r], rstd[r]);
  });
}

namespace {
constexpr int kNormRowBlock = 16;  // rows whose parameter gradients are summed before widening
}  // namespace

// Inputs (grad_y, x, weight?, mean, rstd) -> outputs (dx, dweight, dbias).
void layer_norm_backward(const KernelArgs& k) {
  const Tensor g = raw::contiguous(k.in[0]);
  const Tensor x = raw::contiguous(k.in[1]);
  const Tensor w = k.in[2].defined() ? raw::contiguous(k.in[2]) : Tensor();
  const Tensor mean_in = raw::contiguous(k.in[3]), rstd_in = raw::contiguous(k.in[4]);
  visit_float(x.dtype(), "layer_norm_backward", [&]<class T>() {
    const int64_t n = x.dim() ? x.shape().back() : 1, rows = n ? x.numel() / n : 0;
    const T* gp = g.data<T>();
    const T* xp = x.data<T>();
    const T* wp = w.defined() ? w.data<T>() : nullptr;
    const T* mean = mean_in.data<T>();
    const T* rstd = rstd_in.data<T>();
    T* dx = k.out[0].data<T>();
    const int threads = rows * n >= kParallelGrain ? omp_get_max_threads() : 1;
    std::vector<Arr<double>> dw(size_t(threads), Arr<double>::Zero(n)), db(size_t(threads), Arr<double>::Zero(n));
#pragma omp parallel num_threads(threads)
    {
      const int t = omp_get_thread_num();
      Arr<T> xhat(n), gw(n);
      // The parameter gradients are summed over a block of rows in T, each block's sum then
      // added in double: widening every row cost as much as the row's own arithmetic.
      Arr<T> dw_rows = Arr<T>::Zero(n), db_rows = Arr<T>::Zero(n);
      int in_block = 0;
      auto flush = [&] {
        dw[size_t(t)] += dw_rows.template cast<double>();
        db[size_t(t)] += db_rows.template cast<double>();
        dw_rows.setZero();
        db_rows.setZero();
        in_block = 0;
      };
#pragma omp for schedule(static)
      for (int64_t r = 0; r < rows; ++r) {
        ConstArrMap<T> gr(gp + r * n, n), xr(xp + r * n, n);
        xhat = (xr - mean[r]) * rstd[r];
        dw_rows += gr * xhat;
        db_rows += gr;
        if (++in_block == kNormRowBlock) flush();
        if (wp) gw = gr * ConstArrMap<T>(wp, n);
        else gw = gr;
        const T mean_gw = gw.mean(), mean_gwx = (gw * xhat).mean();
        ArrMap<T>(dx + r * n, n) = rstd[r] * (gw - mean_gw - xhat * mean_gwx);
      }
      flush();
    }
    for (int t = 1; t < threads; ++t) {
      dw[0] += dw[size_t(t)];
      db[0] += db[size_t(t)];
    }
    ArrMap<T>(k.out[1].data<T>(), n) = dw[0].template cast<T>();
    ArrMap<T>(k.out[2].data<T>(), n) = db[0].template cast<T>();
  });
}

}  // namespace qkv::kernels::cpu
