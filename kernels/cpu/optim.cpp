// The optimizer kernels: adam_update and sgd_update (one step of torch.optim.Adam / AdamW / SGD
// on the single-tensor path, in place, over groups of tensors) and clip_grad_norm (the global L2
// norm of a list of grads, which it rescales in place when the norm is above max_norm).
//
// The step's scalars are computed in double, as PyTorch computes them in Python, then cast to
// the parameter's dtype; every element is updated in that dtype, in PyTorch's order:
//   Adam:  g = g + wd * p                                            (Adam only)
//          p = p * (1 - lr * wd)                                     (AdamW only)
//          m = b1 * m + (1 - b1) * g
//          v = b2 * v + (1 - b2) * g * g
//          p = p - (lr / bc1) * (m / (sqrt(v) / sqrt(bc2) + eps)),  bc_i = 1 - b_i^t
//   SGD:   g = g + wd * p
//          buf = g on the first update, else momentum * buf + g      (momentum != 0)
//          g = nesterov ? g + momentum * buf : buf                   (momentum != 0)
//          p = p - lr * g
// Written tensors arrive contiguous (call_op checks); a grad that is only read may be strided
// and is read through a contiguous copy.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/loops.h"
#include "tensor/view.h"

namespace qkv::kernels::cpu {
namespace {

// Calls fn(i) for every group i, given each group's element count. A group of at least
// kParallelGrain elements runs alone, its own loop spread over the threads; the smaller ones run
// side by side, one group per thread at a time, each loop serial. Either way every element sees
// the same arithmetic, so the result does not depend on the split.
template <class F> void for_each_group(const std::vector<int64_t>& sizes, F&& fn) {
  std::vector<size_t> small;
  int64_t small_elements = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] >= kParallelGrain) {
      fn(i);
    } else {
      small.push_back(i);
      small_elements += sizes[i];
    }
  }
  const int64_t count = int64_t(small.size());
#pragma omp parallel for schedule(dynamic) if (count > 1 && small_elements >= kParallelGrain)
  for (int64_t k = 0; k < count; ++k) fn(small[size_t(k)]);
}

template <class T> T* ptr(const Tensor& t) { return t.defined() ? static_cast<T*>(t.raw_data()) : nullptr; }

std::vector<int64_t> group_sizes(std::span<const Tensor> in, size_t group_size) {
  std::vector<int64_t> sizes;
  for (size_t i = 0; i < in.size(); i += group_size) sizes.push_back(in[i].numel());
  return sizes;
}

// Input 1 of every group (the grad, only read) as a contiguous tensor, kept alive by the caller
// while the loops run.
std::vector<Tensor> contiguous_grads(std::span<const Tensor> in, size_t group_size) {
  std::vector<Tensor> grads;
  for (size_t i = 0; i < in.size(); i += group_size) grads.push_back(raw::contiguous(in[i + 1]));
  return grads;
}

// ---- adam_update ------------------------------------------------------------------------------

struct AdamCoefficients {
  double beta1, one_minus_beta1, beta2, one_minus_beta2;
  double l2;     // added to the gradient times p (Adam), else 0
  double decay;  // p is multiplied by this first (AdamW), else 1
  double bias_correction2_sqrt;
  double step_size;  // lr / bias_correction1
  double eps;
};

AdamCoefficients adam_coefficients(const AdamAttrs& a) {
  const double t = double(a.step);
  AdamCoefficients c;
  c.beta1 = a.beta1;
  c.one_minus_beta1 = 1 - a.beta1;
  c.beta2 = a.beta2;
  c.one_minus_beta2 = 1 - a.beta2;
  c.l2 = a.decoupled ? 0.0 : a.weight_decay;
  c.decay = a.decoupled ? 1 - a.lr * a.weight_decay : 1.0;
  c.bias_correction2_sqrt = std::sqrt(1 - std::pow(a.beta2, t));
  c.step_size = a.lr / (1 - std::pow(a.beta1, t));
  c.eps = a.eps;
  return c;
}

template <class T> void adam_tensor(T* p, const T* g, T* m, T* v, int64_t n, const AdamCoefficients& c) {
  const T b1 = T(c.beta1), a1 = T(c.one_minus_beta1), b2 = T(c.beta2), a2 = T(c.one_minus_beta2);
  const T l2 = T(c.l2), decay = T(c.decay), bc2_sqrt = T(c.bias_correction2_sqrt);
  const T step_size = T(c.step_size), eps = T(c.eps);
  const bool use_l2 = c.l2 != 0, use_decay = c.decay != 1;
#pragma omp parallel for schedule(static) if (n >= kParallelGrain)
  for (int64_t i = 0; i < n; ++i) {
    const T gi = use_l2 ? g[i] + l2 * p[i] : g[i];
    const T pi = use_decay ? p[i] * decay : p[i];
    const T mi = b1 * m[i] + a1 * gi;
    const T vi = b2 * v[i] + a2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    const T denom = std::sqrt(vi) / bc2_sqrt + eps;
    p[i] = pi - step_size * (mi / denom);
  }
}

// ---- sgd_update -------------------------------------------------------------------------------

template <class T> void sgd_tensor(T* p, const T* g, T* buf, int64_t n, const SgdAttrs& c) {
  const T lr = T(c.lr), mom = T(c.momentum), wd = T(c.weight_decay);
  const bool use_wd = c.weight_decay != 0, use_mom = c.momentum != 0;
#pragma omp parallel for schedule(static) if (n >= kParallelGrain)
  for (int64_t i = 0; i < n; ++i) {
    T d = use_wd ? g[i] + wd * p[i] : g[i];
    if (use_mom) {
      const T b = c.first ? d : mom * buf[i] + d;
      buf[i] = b;
      d = c.nesterov ? d + mom * b : b;
    }
    p[i] = p[i] - lr * d;
  }
}

// ---- clip_grad_norm ---------------------------------------------------------------------------

template <class T> double sum_of_squares(const T* g, int64_t n) {
  double acc = 0;
#pragma omp parallel for schedule(static) reduction(+ : acc) if (n >= kParallelGrain)
  for (int64_t i = 0; i < n; ++i) acc += double(g[i]) * double(g[i]);
  return acc;
}

template <class T> void scale(T* g, int64_t n, double factor) {
  const T f = T(factor);
#pragma omp parallel for schedule(static) if (n >= kParallelGrain)
  for (int64_t i = 0; i < n; ++i) g[i] = g[i] * f;
}

}  // namespace

// Groups of (param, grad, exp_avg, exp_avg_sq).
void adam_update(const KernelArgs& k) {
  const AdamCoefficients c = adam_coefficients(attr<AdamAttrs>(k.attrs, "adam_update"));
  const std::vector<int64_t> sizes = group_sizes(k.in, 4);
  const std::vector<Tensor> grads = contiguous_grads(k.in, 4);
  for_each_group(sizes, [&](size_t i) {
    const Tensor* t = &k.in[4 * i];
    visit_float(t[0].dtype(), "adam_update", [&]<class T>() {
      adam_tensor(ptr<T>(t[0]), ptr<const T>(grads[i]), ptr<T>(t[2]), ptr<T>(t[3]), sizes[i], c);
    });
  });
}

// Groups of (param, grad, momentum_buffer); the buffer is undefined when momentum is 0.
void sgd_update(const KernelArgs& k) {
  const SgdAttrs& c = attr<SgdAttrs>(k.attrs, "sgd_update");
  const std::vector<int64_t> sizes = group_sizes(k.in, 3);
  const std::vector<Tensor> grads = contiguous_grads(k.in, 3);
  for_each_group(sizes, [&](size_t i) {
    const Tensor* t = &k.in[3 * i];
    visit_float(t[0].dtype(), "sgd_update",
                [&]<class T>() { sgd_tensor(ptr<T>(t[0]), ptr<const T>(grads[i]), ptr<T>(t[2]), sizes[i], c); });
  });
}

// One grad per group; out[0] is the 0-dim float64 norm. The per-grad sums run in any order but
// are added in input order, so the norm is the same as one serial pass over the grads.
void clip_grad_norm(const KernelArgs& k) {
  const ClipAttrs& a = attr<ClipAttrs>(k.attrs, "clip_grad_norm");
  const std::vector<int64_t> sizes = group_sizes(k.in, 1);
  std::vector<double> partial(sizes.size());
  for_each_group(sizes, [&](size_t i) {
    partial[i] = visit_float(k.in[i].dtype(), "clip_grad_norm",
                             [&]<class T>() { return sum_of_squares(ptr<const T>(k.in[i]), sizes[i]); });
  });
  double total = 0;
  for (double s : partial) total += s;
  // unscale is a power of two: scaling the norm equals the norm of the unscaled grads exactly.
  const double norm = std::sqrt(total) * a.unscale;
  *ptr<double>(k.out[0]) = norm;
  if (!std::isfinite(norm)) return;  // nothing is scaled: the caller can skip the step
  const double factor = a.unscale * std::min(1.0, a.max_norm / (norm + 1e-6));
  if (factor == 1) return;
  for_each_group(sizes, [&](size_t i) {
    visit_float(k.in[i].dtype(), "clip_grad_norm", [&]<class T>() { scale(ptr<T>(k.in[i]), sizes[i], factor); });
  });
}

}  // namespace qkv::kernels::cpu
