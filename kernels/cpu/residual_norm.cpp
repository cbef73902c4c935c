// dropout_add_layer_norm on the CPU: one pass over the rows, each row's dropout, add and layer
// norm computed as the unfused kernels compute them (the dropout's select, the add, the shared
// layer_norm_row), so the fused op equals dropout, add and layer_norm bit for bit. The branch
// after dropout is never stored: per row it goes from registers into the sum.
#include <omp.h>

#include "kernels/cpu/compose.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/layer_norm_row.h"
#include "kernels/cpu/philox_batch.h"
#include "tensor/view.h"

namespace qkv::kernels::cpu {
namespace {

// sum = x + dropout(y) and its layer norm, row by row; p in (0, 1).
template <class T> void fused_rows(const KernelArgs& k, const DropoutAddNormAttrs& a) {
  const Tensor x = raw::contiguous(k.in[0]), y = raw::contiguous(k.in[1]);
  const Tensor w = k.in[2].defined() ? raw::contiguous(k.in[2]) : Tensor();
  const Tensor b = k.in[3].defined() ? raw::contiguous(k.in[3]) : Tensor();
  const int64_t n = x.shape().back(), rows = x.numel() / n;
  const T *xp = x.data<T>(), *yp = y.data<T>();
  const T* wp = w.defined() ? w.data<T>() : nullptr;
  const T* bp = b.defined() ? b.data<T>() : nullptr;
  T *normed = k.out[0].data<T>(), *mean = k.out[1].data<T>(), *rstd = k.out[2].data<T>(), *sum = k.out[3].data<T>();
  const T scale = T(1.0 / (1.0 - a.p));
  const uint32_t threshold = uint32_t(unit_threshold(a.p));
#pragma omp parallel if (rows * n >= kParallelGrain)
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
      layer_norm_row(sum + r * n, normed + r * n, n, a.eps, wp, bp, mean[r], rstd[r]);
    }
  }
}

}  // namespace

// Inputs (x, y [..., D], weight? bias? [D]) -> (normed, mean, rstd: layer_norm's outputs for
// sum; sum = x + dropout(y)).
void dropout_add_layer_norm(const KernelArgs& k) {
  const auto& a = attr<DropoutAddNormAttrs>(k.attrs, "dropout_add_layer_norm");
  const bool fused = a.p > 0 && a.p < 1 && k.in[0].numel() > 0;
  if (fused) return visit_float(k.in[0].dtype(), "dropout_add_layer_norm", [&]<class T>() { fused_rows<T>(k, a); });
  // No dropout (or all of it): the add and the norm.
  Tensor branch = k.in[1];
  if (a.p > 0) {
    branch = empty(k.in[1].shape(), {k.in[1].dtype(), k.in[1].device()});
    run_kernel(dropout, {k.in[1]}, {branch}, DropoutAttrs{a.p, a.seed, a.offset});
  }
  run_kernel(add, {k.in[0], branch}, {k.out[3]}, NoAttrs{});
  run_kernel(layer_norm, {k.out[3], k.in[2], k.in[3]}, {k.out[0], k.out[1], k.out[2]}, LayerNormAttrs{a.eps});
}

}  // namespace qkv::kernels::cpu
