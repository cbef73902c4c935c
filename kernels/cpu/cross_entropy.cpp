// Fused cross-entropy: log-softmax and negative log-likelihood in one pass over the logits,
// with an ignore index and mean / sum / none reduction. The forward keeps each row's
// log-sum-exp so the backward is softmax - one_hot without recomputing the normalizer.
#include <cmath>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/loops.h"
#include "kernels/index_checks.h"
#include "tensor/view.h"

namespace qkv::kernels::cpu {

// Inputs (logits [..., C], target [...]) -> outputs (loss, lse [...]).
void cross_entropy(const KernelArgs& k) {
  const auto& a = attr<CrossEntropyAttrs>(k.attrs, "cross_entropy");
  const Tensor logits = raw::contiguous(k.in[0]);
  const Tensor target = raw::contiguous(k.in[1]);
  const int64_t C = logits.shape().back(), rows = C ? logits.numel() / C : 0;
  visit_float(logits.dtype(), "cross_entropy", [&]<class T>() {
    visit_index(target.dtype(), "cross_entropy", [&]<class I>() {
      const T* x = logits.data<T>();
      const I* t = target.data<I>();
      check_targets(t, rows, C, a.ignore_index);
      T* lse = k.out[1].data<T>();
      std::vector<double> loss(static_cast<size_t>(rows));
#pragma omp parallel for schedule(static) if (rows * C >= kParallelGrain)
      for (int64_t r = 0; r < rows; ++r) {
        ConstArrMap<T> xr(x + r * C, C);
        const T m = xr.maxCoeff();
        lse[r] = m + std::log((xr - m).exp().sum());
        loss[size_t(r)] = t[r] == a.ignore_index ? 0.0 : double(lse[r]) - double(xr[int64_t(t[r])]);
      }
      T* out = k.out[0].data<T>();
      if (a.reduction == Reduction::none) {
        for (int64_t r = 0; r < rows; ++r) out[r] = T(loss[size_t(r)]);
        return;
      }
      double total = 0;
      for (double v : loss) total += v;
      if (a.reduction == Reduction::mean) total /= double(count_valid(t, rows, a.ignore_index));
      out[0] = T(total);
    });
  });
}

// Inputs (grad_loss, logits, target, lse) -> output dlogits.
void cross_entropy_backward(const KernelArgs& k) {
  const auto& a = attr<CrossEntropyAttrs>(k.attrs, "cross_entropy_backward");
  const Tensor g = raw::contiguous(k.in[0]);
  const Tensor logits = raw::contiguous(k.in[1]);
  const Tensor target = raw::contiguous(k.in[2]);
  const Tensor lse_in = raw::contiguous(k.in[3]);
  const int64_t C = logits.shape().back(), rows = C ? logits.numel() / C : 0;
  visit_float(logits.dtype(), "cross_entropy_backward", [&]<class T>() {
    visit_index(target.dtype(), "cross_entropy_backward", [&]<class I>() {
      const T* x = logits.data<T>();
      const I* t = target.data<I>();
      const T* lse = lse_in.data<T>();
      const T* gp = g.data<T>();
      T* dx = k.out[0].data<T>();
      const double denom = a.reduction == Reduction::mean ? double(count_valid(t, rows, a.ignore_index)) : 1.0;
#pragma omp parallel for schedule(static) if (rows * C >= kParallelGrain)
      for (int64_t r = 0; r < rows; ++r) {
        ArrMap<T> d(dx + r * C, C);
        if (t[r] == a.ignore_index) {
          d.setZero();
          continue;
        }
        const T scale = T(double(a.reduction == Reduction::none ? gp[r] : gp[0]) / denom);
        d = (ConstArrMap<T>(x + r * C, C) - lse[r]).exp() * scale;
        d[int64_t(t[r])] -= scale;
      }
    });
  });
}

}  // namespace qkv::kernels::cpu
