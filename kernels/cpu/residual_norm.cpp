// dropout_add_layer_norm and dropout_add_rms_norm on the CPU: one pass over the rows, each row's
// dropout, add and norm computed as the unfused kernels compute them (the dropout's select, the
// add, the shared norm_row), so the fused op equals dropout, add and the norm bit for bit. The branch
// after dropout is never stored: per row it goes from registers into the sum.
#include <omp.h>

#include "kernels/cpu/compose.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/layer_norm_row.h"
#include "kernels/cpu/philox_batch.h"
#include "tensor/view.h"

namespace qkv::kernels::cpu {
namespace {

// The tensors of one fused call: b and mean undefined for the RMS norm.
struct NormOperands {
  Tensor x, y, w, b;
  Tensor normed, mean, rstd, sum;
};

// sum = x + dropout(y) and its norm, row by row; p in (0, 1).
template <bool kCentered, class T> void fused_rows(const NormOperands& o, const DropoutAddNormAttrs& a) {
  const Tensor x = raw::contiguous(o.x), y = raw::contiguous(o.y);
  const Tensor w = o.w.defined() ? raw::contiguous(o.w) : Tensor();
  const Tensor b = o.b.defined() ? raw::contiguous(o.b) : Tensor();
  const int64_t n = x.shape().back(), rows = x.numel() / n;
  const T *xp = x.data<T>(), *yp = y.data<T>();
  const T* wp = w.defined() ? w.data<T>() : nullptr;
  const T* bp = b.defined() ? b.data<T>() : nullptr;
  T *normed = o.normed.data<T>(), *rstd = o.rstd.data<T>(), *sum = o.sum.data<T>();
  T* mean = o.mean.defined() ? o.mean.data<T>() : nullptr;
  T unused_mean = 0;
  const T scale = T(1.0 / (1.0 - a.p));
  const uint32_t threshold = uint32_t(unit_threshold(a.p));
#pragma omp parallel firstprivate(unused_mean) if (rows * n >= kParallelGrain)
  {
    PhiloxWords words(a.seed, a.offset);  // a thread's rows are consecutive: batches are reused
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      // The row's elements in stretches that lie within one batch of words.
      for (int64_t i = r * n, end = (r + 1) * n; i < end;) {
        const int64_t m = std::min(end - i, PhiloxWords::kWords - i % PhiloxWords::kWords);
        const uint32_t* __restrict u = words.at(i);
        const T* __restrict xi = xp + i;
        const T* __restrict yi = yp + i;
        T* __restrict si = sum + i;
#pragma omp simd
        for (int64_t j = 0; j < m; ++j) {
          const T kept = yi[j] * scale;  // dropout's value, then add's
          si[j] = xi[j] + (u[j] >= threshold ? kept : T(0));
        }
        i += m;
      }
      norm_row<kCentered>(sum + r * n, normed + r * n, n, a.eps, wp, bp, mean ? mean[r] : unused_mean, rstd[r]);
    }
  }
}

// The fused rows, or without dropout (or with all of it) the add and the unfused norm.
template <bool kCentered> void dropout_add_norm(const NormOperands& o, const DropoutAddNormAttrs& a, const char* op) {
  if (a.p > 0 && a.p < 1 && o.x.numel() > 0)
    return visit_float(o.x.dtype(), op, [&]<class T>() { fused_rows<kCentered, T>(o, a); });
  Tensor branch = o.y;
  if (a.p > 0) {
    branch = empty(o.y.shape(), {o.y.dtype(), o.y.device()});
    run_kernel(dropout, {o.y}, {branch}, DropoutAttrs{a.p, a.seed, a.offset});
  }
  run_kernel(add, {o.x, branch}, {o.sum}, NoAttrs{});
  if (kCentered) run_kernel(layer_norm, {o.sum, o.w, o.b}, {o.normed, o.mean, o.rstd}, LayerNormAttrs{a.eps});
  else run_kernel(rms_norm, {o.sum, o.w}, {o.normed, o.rstd}, LayerNormAttrs{a.eps});
}

}  // namespace

// Inputs (x, y [..., D], weight? bias? [D]) -> (normed, mean, rstd: layer_norm's outputs for
// sum; sum = x + dropout(y)).
void dropout_add_layer_norm(const KernelArgs& k) {
  dropout_add_norm<true>({k.in[0], k.in[1], k.in[2], k.in[3], k.out[0], k.out[1], k.out[2], k.out[3]},
                         attr<DropoutAddNormAttrs>(k.attrs, "dropout_add_layer_norm"), "dropout_add_layer_norm");
}

// Inputs (x, y [..., D], weight? [D]) -> (normed, rstd: rms_norm's outputs for sum; sum).
void dropout_add_rms_norm(const KernelArgs& k) {
  dropout_add_norm<false>({k.in[0], k.in[1], k.in[2], Tensor(), k.out[0], Tensor(), k.out[1], k.out[2]},
                          attr<DropoutAddNormAttrs>(k.attrs, "dropout_add_rms_norm"), "dropout_add_rms_norm");
}

}  // namespace qkv::kernels::cpu
