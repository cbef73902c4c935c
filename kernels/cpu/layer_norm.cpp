// Fused layer norm and RMS norm over the last dim, with an optional affine weight (and, for the
// layer norm, bias). The forward saves the per-row mean (layer norm) and 1/std; the backward
// kernel produces dx and the parameter gradients in one pass over the rows (per-thread partial
// sums for the parameter gradients). RMS norm is the layer norm without centering: one template
// serves both.
#include <cmath>
#include <omp.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/layer_norm_row.h"
#include "kernels/cpu/loops.h"
#include "tensor/view.h"

namespace qkv::kernels::cpu {
namespace {

Tensor contiguous_or_none(const Tensor& t) { return t.defined() ? raw::contiguous(t) : Tensor(); }
template <class T> const T* ptr_or_null(const Tensor& t) { return t.defined() ? t.data<T>() : nullptr; }
template <class T> T* mut_or_null(const Tensor& t) { return t.defined() ? t.data<T>() : nullptr; }

// y = norm(x) * w + b over the rows; mean may be undefined (RMS norm).
template <bool kCentered>
void norm_forward(const Tensor& x_in, const Tensor& w_in, const Tensor& b_in, double eps, const Tensor& y_out,
                  const Tensor& mean_out, const Tensor& rstd_out, const char* op) {
  const Tensor x = raw::contiguous(x_in), w = contiguous_or_none(w_in), b = contiguous_or_none(b_in);
  visit_float(x.dtype(), op, [&]<class T>() {
    const int64_t n = x.dim() ? x.shape().back() : 1, rows = n ? x.numel() / n : 0;
    const T* xp = x.data<T>();
    T* y = y_out.data<T>();
    T* mean = mut_or_null<T>(mean_out);
    T* rstd = rstd_out.data<T>();
    const T *wp = ptr_or_null<T>(w), *bp = ptr_or_null<T>(b);
    T unused_mean = 0;
#pragma omp parallel for schedule(static) firstprivate(unused_mean) if (rows * n >= kParallelGrain)
    for (int64_t r = 0; r < rows; ++r)
      norm_row<kCentered>(xp + r * n, y + r * n, n, eps, wp, bp, mean ? mean[r] : unused_mean, rstd[r]);
  });
}

constexpr int kNormRowBlock = 16;  // rows whose parameter gradients are summed before widening

// dx = rstd * (gw - mean(gw) - xhat * mean(gw * xhat)) (RMS norm: without mean(gw)), gw = g * w,
// xhat the normalized row; dweight = sum g * xhat and dbias = sum g over the rows (dbias may be
// undefined).
template <bool kCentered>
void norm_backward(const Tensor& g_in, const Tensor& x_in, const Tensor& w_in, const Tensor& mean_in,
                   const Tensor& rstd_in, const Tensor& dx_out, const Tensor& dw_out, const Tensor& db_out,
                   const char* op) {
  const Tensor g = raw::contiguous(g_in), x = raw::contiguous(x_in), w = contiguous_or_none(w_in);
  const Tensor mean_t = contiguous_or_none(mean_in), rstd_t = raw::contiguous(rstd_in);
  visit_float(x.dtype(), op, [&]<class T>() {
    const int64_t n = x.dim() ? x.shape().back() : 1, rows = n ? x.numel() / n : 0;
    const T* gp = g.data<T>();
    const T* xp = x.data<T>();
    const T* wp = ptr_or_null<T>(w);
    const T* mean = ptr_or_null<T>(mean_t);
    const T* rstd = rstd_t.data<T>();
    T* dx = dx_out.data<T>();
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
        if (kCentered) db[size_t(t)] += db_rows.template cast<double>();
        dw_rows.setZero();
        db_rows.setZero();
        in_block = 0;
      };
#pragma omp for schedule(static)
      for (int64_t r = 0; r < rows; ++r) {
        ConstArrMap<T> gr(gp + r * n, n), xr(xp + r * n, n);
        if constexpr (kCentered) xhat = (xr - mean[r]) * rstd[r];
        else xhat = xr * rstd[r];
        dw_rows += gr * xhat;
        if (kCentered) db_rows += gr;
        if (++in_block == kNormRowBlock) flush();
        if (wp) gw = gr * ConstArrMap<T>(wp, n);
        else gw = gr;
        const T mean_gw = kCentered ? gw.mean() : T(0), mean_gwx = (gw * xhat).mean();
        ArrMap<T>(dx + r * n, n) = rstd[r] * (gw - mean_gw - xhat * mean_gwx);
      }
      flush();
    }
    for (int t = 1; t < threads; ++t) {
      dw[0] += dw[size_t(t)];
      db[0] += db[size_t(t)];
    }
    ArrMap<T>(dw_out.data<T>(), n) = dw[0].template cast<T>();
    if (db_out.defined()) ArrMap<T>(db_out.data<T>(), n) = db[0].template cast<T>();
  });
}

}  // namespace

// Inputs (x, weight?, bias?) -> outputs (y, mean, rstd).
void layer_norm(const KernelArgs& k) {
  norm_forward<true>(k.in[0], k.in[1], k.in[2], attr<LayerNormAttrs>(k.attrs, "layer_norm").eps, k.out[0], k.out[1],
                     k.out[2], "layer_norm");
}

// Inputs (grad_y, x, weight?, mean, rstd) -> outputs (dx, dweight, dbias).
void layer_norm_backward(const KernelArgs& k) {
  norm_backward<true>(k.in[0], k.in[1], k.in[2], k.in[3], k.in[4], k.out[0], k.out[1], k.out[2], "layer_norm_backward");
}

// Inputs (x, weight?) -> outputs (y, rstd).
void rms_norm(const KernelArgs& k) {
  norm_forward<false>(k.in[0], k.in[1], Tensor(), attr<LayerNormAttrs>(k.attrs, "rms_norm").eps, k.out[0], Tensor(),
                      k.out[1], "rms_norm");
}

// Inputs (grad_y, x, weight?, rstd) -> outputs (dx, dweight).
void rms_norm_backward(const KernelArgs& k) {
  norm_backward<false>(k.in[0], k.in[1], k.in[2], Tensor(), k.in[3], k.out[0], k.out[1], Tensor(), "rms_norm_backward");
}

}  // namespace qkv::kernels::cpu
