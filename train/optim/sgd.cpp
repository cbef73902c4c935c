// SGD: option checks, the fused CPU loop and the generic path built from qkv ops (any device or
// layout). Both evaluate, in the parameter's dtype and in PyTorch's order:
//   g = g + wd * p
//   buf = g on the first update, else momentum * buf + g          (momentum != 0)
//   g = nesterov ? g + momentum * buf : buf                       (momentum != 0)
//   p = p - lr * g
#include "train/optim/sgd.h"

#include <cmath>

#include "autograd/ops.h"

namespace qkv::optim {
namespace {

constexpr int64_t kParallelThreshold = 1 << 15;   // elements; below this one thread is faster

void check_options(const SGDOptions& o) {
  check<ValueError>(std::isfinite(o.momentum) && o.momentum >= 0, "SGD: momentum must be finite and >= 0, got ",
                    o.momentum);
  check<ValueError>(std::isfinite(o.weight_decay) && o.weight_decay >= 0,
                    "SGD: weight_decay must be finite and >= 0, got ", o.weight_decay);
  check<ValueError>(!o.nesterov || o.momentum > 0, "SGD: nesterov needs momentum > 0");
}

struct Coefficients {
  double lr, momentum, weight_decay;
  bool nesterov, first;                         // first: this parameter's first update
};

template <class T>
void fused_update(T* p, const T* g, T* buf, int64_t n, const Coefficients& c) {
  const T lr = T(c.lr), mom = T(c.momentum), wd = T(c.weight_decay);
  const bool use_wd = c.weight_decay != 0, use_mom = c.momentum != 0;
#pragma omp parallel for schedule(static) if (n >= kParallelThreshold)
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

void generic_update(Tensor& p, const Tensor& grad, Tensor* buf, const Coefficients& c) {
  Tensor d = c.weight_decay != 0 ? grad + c.weight_decay * p : grad;
  if (buf) {
    buf->copy_(c.first ? d : c.momentum * *buf + d);
    d = c.nesterov ? d + c.momentum * *buf : *buf;
  }
  p.copy_(p - c.lr * d);
}

}  // namespace

SGD::SGD(NamedTensors params, SGDOptions options)
    : Optimizer("SGD", std::move(params), options.lr), options_(options) {
  check_options(options);
}

std::vector<std::string> SGD::buffer_names() const {
  if (options_.momentum == 0) return {};
  return {"momentum_buffer"};
}

void SGD::update(Tensor& param, const Tensor& grad, ParamState& state) {
  const Coefficients c{lr(), options_.momentum, options_.weight_decay, options_.nesterov, state.step == 1};
  Tensor* buf = state.buffers.empty() ? nullptr : &state.buffers[0];
  const bool fusable = buf ? is_fusable_cpu({param, grad, *buf}) : is_fusable_cpu({param, grad});
  if (!fusable) return generic_update(param, grad, buf, c);
  if (param.dtype() == DType::f32)
    fused_update(param.data<float>(), grad.data<float>(), buf ? buf->data<float>() : nullptr, param.numel(), c);
  else
    fused_update(param.data<double>(), grad.data<double>(), buf ? buf->data<double>() : nullptr, param.numel(), c);
  param.storage()->bump_version();
}

}  // namespace qkv::optim
