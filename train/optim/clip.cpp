// clip_grad_norm: the global gradient norm (a fused double-accumulating loop for contiguous CPU
// grads, qkv ops elsewhere) and the in-place rescaling of the grads.
#include "train/optim/clip.h"

#include <cmath>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"

namespace qkv::optim {
namespace {

constexpr int64_t kParallelThreshold = 1 << 15;   // elements; below this one thread is faster

template <class T>
double fused_sum_of_squares(const T* g, int64_t n) {
  double acc = 0;
#pragma omp parallel for schedule(static) reduction(+ : acc) if (n >= kParallelThreshold)
  for (int64_t i = 0; i < n; ++i) acc += double(g[i]) * double(g[i]);
  return acc;
}

template <class T>
void fused_scale(T* g, int64_t n, double factor) {
  const T f = T(factor);
#pragma omp parallel for schedule(static) if (n >= kParallelThreshold)
  for (int64_t i = 0; i < n; ++i) g[i] = g[i] * f;
}

// The sum of squares of a fusable grad, computed here. Other grads add theirs to a 0-dim
// float64 tensor kept per device (returning 0), so CUDA grads cost one host copy per device.
double sum_of_squares(const Tensor& g, std::vector<Tensor>& device_partials) {
  if (is_fusable_cpu({g}))
    return g.dtype() == DType::f32 ? fused_sum_of_squares(g.data<float>(), g.numel())
                                   : fused_sum_of_squares(g.data<double>(), g.numel());
  const Tensor g64 = cast(g, DType::f64);
  const Tensor s = sum(g64 * g64);
  for (Tensor& partial : device_partials)
    if (partial.device() == s.device()) {
      partial = partial + s;
      return 0.0;
    }
  device_partials.push_back(s);
  return 0.0;
}

void scale_in_place(Tensor& g, double factor) {
  if (!is_fusable_cpu({g})) {
    g.copy_(g * factor);
    return;
  }
  if (g.dtype() == DType::f32)
    fused_scale(g.data<float>(), g.numel(), factor);
  else
    fused_scale(g.data<double>(), g.numel(), factor);
  g.storage()->bump_version();
}

}  // namespace

double clip_grad_norm(const NamedTensors& params, double max_norm) {
  check<ValueError>(!std::isnan(max_norm) && max_norm > 0, "clip_grad_norm: max_norm must be > 0, got ", max_norm);
  NoGradGuard no_grad;
  double total = 0;
  std::vector<Tensor> device_partials;
  for (const auto& entry : params) {
    const Tensor g = entry.second.grad();
    if (g.defined()) total += sum_of_squares(g, device_partials);
  }
  for (const Tensor& partial : device_partials) total += partial.item<double>();
  const double norm = std::sqrt(total);
  if (!std::isfinite(norm)) return norm;
  const double factor = max_norm / (norm + 1e-6);
  if (factor >= 1) return norm;
  for (const auto& entry : params) {
    Tensor g = entry.second.grad();
    if (g.defined()) scale_in_place(g, factor);
  }
  return norm;
}

}  // namespace qkv::optim
