// Adam / AdamW: option checks, the step's scalar coefficients, the fused CPU loop and the
// generic path built from qkv ops (any device or layout). Both paths evaluate the same
// expressions in the parameter's dtype, in the order PyTorch's single-tensor Adam does:
//   g = g + wd * p                       (Adam only)
//   p = p * (1 - lr * wd)                (AdamW only)
//   m = b1 * m + (1 - b1) * g
//   v = b2 * v + (1 - b2) * g * g
//   p = p - (lr / bc1) * (m / (sqrt(v) / sqrt(bc2) + eps)),  bc_i = 1 - b_i^t
#include "train/optim/adam.h"

#include <cmath>

#include "autograd/ops.h"

namespace qkv::optim {
namespace {

constexpr int64_t kParallelThreshold = 1 << 15;   // elements; below this one thread is faster

void check_options(const std::string& name, const AdamOptions& o) {
  check<ValueError>(o.beta1 >= 0 && o.beta1 < 1, name, ": beta1 must be in [0, 1), got ", o.beta1);
  check<ValueError>(o.beta2 >= 0 && o.beta2 < 1, name, ": beta2 must be in [0, 1), got ", o.beta2);
  check<ValueError>(std::isfinite(o.eps) && o.eps >= 0, name, ": eps must be finite and >= 0, got ", o.eps);
  check<ValueError>(std::isfinite(o.weight_decay) && o.weight_decay >= 0, name,
                    ": weight_decay must be finite and >= 0, got ", o.weight_decay);
}

// The scalars of one update, computed in double as PyTorch computes them in Python.
struct Coefficients {
  double beta1, one_minus_beta1, beta2, one_minus_beta2;
  double l2;                                    // added to the gradient times p (Adam), else 0
  double decay;                                 // p is multiplied by this first (AdamW), else 1
  double bias_correction2_sqrt;
  double step_size;                             // lr / bias_correction1
  double eps;
};

Coefficients coefficients(const AdamOptions& o, double lr, int64_t step, bool decoupled) {
  const double t = double(step);
  Coefficients c;
  c.beta1 = o.beta1;
  c.one_minus_beta1 = 1 - o.beta1;
  c.beta2 = o.beta2;
  c.one_minus_beta2 = 1 - o.beta2;
  c.l2 = decoupled ? 0.0 : o.weight_decay;
  c.decay = decoupled ? 1 - lr * o.weight_decay : 1.0;
  c.bias_correction2_sqrt = std::sqrt(1 - std::pow(o.beta2, t));
  c.step_size = lr / (1 - std::pow(o.beta1, t));
  c.eps = o.eps;
  return c;
}

template <class T>
void fused_update(T* p, const T* g, T* m, T* v, int64_t n, const Coefficients& c) {
  const T b1 = T(c.beta1), a1 = T(c.one_minus_beta1), b2 = T(c.beta2), a2 = T(c.one_minus_beta2);
  const T l2 = T(c.l2), decay = T(c.decay), bc2_sqrt = T(c.bias_correction2_sqrt);
  const T step_size = T(c.step_size), eps = T(c.eps);
  const bool use_l2 = c.l2 != 0, use_decay = c.decay != 1;
#pragma omp parallel for schedule(static) if (n >= kParallelThreshold)
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

void generic_update(Tensor& p, const Tensor& grad, Tensor& m, Tensor& v, const Coefficients& c) {
  const Tensor g = c.l2 != 0 ? grad + c.l2 * p : grad;
  if (c.decay != 1) p.copy_(p * c.decay);
  m.copy_(c.beta1 * m + c.one_minus_beta1 * g);
  v.copy_(c.beta2 * v + c.one_minus_beta2 * g * g);
  const Tensor denom = sqrt(v) / c.bias_correction2_sqrt + c.eps;
  p.copy_(p - c.step_size * (m / denom));
}

}  // namespace

Adam::Adam(NamedTensors params, AdamOptions options) : Adam("Adam", std::move(params), options, false) {}

Adam::Adam(std::string name, NamedTensors params, AdamOptions options, bool decoupled_decay)
    : Optimizer(name, std::move(params), options.lr), options_(options), decoupled_decay_(decoupled_decay) {
  check_options(name, options);
}

std::vector<std::string> Adam::buffer_names() const { return {"exp_avg", "exp_avg_sq"}; }

void Adam::update(Tensor& param, const Tensor& grad, ParamState& state) {
  const Coefficients c = coefficients(options_, lr(), state.step, decoupled_decay_);
  Tensor& m = state.buffers[0];
  Tensor& v = state.buffers[1];
  if (!is_fusable_cpu({param, grad, m, v})) return generic_update(param, grad, m, v, c);
  if (param.dtype() == DType::f32)
    fused_update(param.data<float>(), grad.data<float>(), m.data<float>(), v.data<float>(), param.numel(), c);
  else
    fused_update(param.data<double>(), grad.data<double>(), m.data<double>(), v.data<double>(), param.numel(), c);
  param.storage()->bump_version();
}

AdamW::AdamW(NamedTensors params, AdamOptions options) : Adam("AdamW", std::move(params), options, true) {}

}  // namespace qkv::optim
