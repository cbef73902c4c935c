// Helpers shared by the optimizer tests: a small parameter, a deterministic gradient per step
// and element, and scalar Adam/AdamW/SGD reference loops written from the PyTorch update rules.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "autograd/autograd.h"
#include "train/optim/adam.h"
#include "train/optim/sgd.h"

namespace qkv::test {

using namespace qkv::optim;

inline const std::vector<double> kInit = {0.5, -1.25, 2.0, 0.0, -0.75, 1.5};

inline Tensor leaf(const std::vector<double>& v, DType dtype = DType::f64) {
  return from_vector(v, {2, 3}).to(dtype).detach().set_requires_grad();
}

// A different, deterministic gradient for every step and element.
inline std::vector<double> grad_at(int step, size_t n) {
  std::vector<double> g(n);
  for (size_t i = 0; i < n; ++i) g[i] = std::sin(1.3 * step + 0.7 * double(i) + 0.1) * (1.0 + 0.5 * double(i));
  return g;
}

inline void give_grad(Tensor& p, const std::vector<double>& g) { p.set_grad(from_vector(g, p.shape()).to(p.dtype())); }

inline std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }

inline void check_close(const std::vector<double>& got, const std::vector<double>& want, double rtol) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << ": got " << got[i] << ", want " << want[i]);
    CHECK(std::abs(got[i] - want[i]) <= rtol * std::max(1.0, std::abs(want[i])));
  }
}

// ---- scalar references, written from the PyTorch update rules ------------------------------

struct AdamRef {
  std::vector<double> p, m, v;
  int64_t t = 0;
  explicit AdamRef(std::vector<double> init) : p(init), m(init.size(), 0.0), v(init.size(), 0.0) {}
  void step(const std::vector<double>& g, double lr, const AdamOptions& o, bool decoupled) {
    ++t;
    const double bc1 = 1 - std::pow(o.beta1, double(t)), bc2 = 1 - std::pow(o.beta2, double(t));
    for (size_t i = 0; i < p.size(); ++i) {
      double gi = g[i];
      if (decoupled) p[i] *= 1 - lr * o.weight_decay;
      else gi += o.weight_decay * p[i];
      m[i] = o.beta1 * m[i] + (1 - o.beta1) * gi;
      v[i] = o.beta2 * v[i] + (1 - o.beta2) * gi * gi;
      p[i] -= lr / bc1 * m[i] / (std::sqrt(v[i]) / std::sqrt(bc2) + o.eps);
    }
  }
};

struct SGDRef {
  std::vector<double> p, buf;
  bool first = true;
  explicit SGDRef(std::vector<double> init) : p(init), buf(init.size(), 0.0) {}
  void step(const std::vector<double>& g, double lr, const SGDOptions& o) {
    for (size_t i = 0; i < p.size(); ++i) {
      double d = g[i] + o.weight_decay * p[i];
      if (o.momentum != 0) {
        buf[i] = first ? d : o.momentum * buf[i] + d;
        d = o.nesterov ? d + o.momentum * buf[i] : buf[i];
      }
      p[i] -= lr * d;
    }
    first = false;
  }
};

// Runs `steps` Adam/AdamW steps on a parameter and on the reference, halving lr at step 2.
inline void compare_adam(DType dtype, const AdamOptions& o, bool decoupled, double rtol, bool contiguous = true) {
  Tensor p = leaf(kInit, dtype);
  if (!contiguous) {  // the same values, as a transposed (non-contiguous) view of a [3, 2] tensor
    p = from_vector(kInit, {2, 3}).to(dtype).transpose(0, 1).contiguous().transpose(0, 1).detach();
    p.set_requires_grad();
    REQUIRE_FALSE(p.is_contiguous());
  }
  std::unique_ptr<Adam> opt = decoupled ? std::make_unique<AdamW>(NamedTensors{{"w", p}}, o)
                                        : std::make_unique<Adam>(NamedTensors{{"w", p}}, o);
  AdamRef ref(kInit);
  for (int k = 0; k < 5; ++k) {
    if (k == 2) opt->set_lr(o.lr / 2);
    give_grad(p, grad_at(k, kInit.size()));
    opt->step();
    ref.step(grad_at(k, kInit.size()), opt->lr(), o, decoupled);
    INFO("step " << k);
    check_close(values(p), ref.p, rtol);
  }
  CHECK(opt->steps() == 5);
}

}  // namespace qkv::test
