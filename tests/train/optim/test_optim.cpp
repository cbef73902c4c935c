// Tests of the optimizers (train/optim/): Adam, AdamW and SGD against scalar reference loops
// written here, non-contiguous parameters, skipped parameters, parameter groups and the op calls
// a step makes, state_dict round trips and their errors, the learning-rate schedules and
// clip_grad_norm.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <numbers>

#include "autograd/autograd.h"
#include "autograd/profiler.h"
#include "train/optim/adam.h"
#include "train/optim/clip.h"
#include "train/optim/schedule.h"
#include "train/optim/sgd.h"

using namespace qkv;
using namespace qkv::optim;

namespace {

const std::vector<double> kInit = {0.5, -1.25, 2.0, 0.0, -0.75, 1.5};

Tensor leaf(const std::vector<double>& v, DType dtype = DType::f64) {
  return from_vector(v, {2, 3}).to(dtype).detach().set_requires_grad();
}

// A different, deterministic gradient for every step and element.
std::vector<double> grad_at(int step, size_t n) {
  std::vector<double> g(n);
  for (size_t i = 0; i < n; ++i) g[i] = std::sin(1.3 * step + 0.7 * double(i) + 0.1) * (1.0 + 0.5 * double(i));
  return g;
}

void give_grad(Tensor& p, const std::vector<double>& g) { p.set_grad(from_vector(g, p.shape()).to(p.dtype())); }

std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }

void check_close(const std::vector<double>& got, const std::vector<double>& want, double rtol) {
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
void compare_adam(DType dtype, const AdamOptions& o, bool decoupled, double rtol, bool contiguous = true) {
  Tensor p = leaf(kInit, dtype);
  if (!contiguous) {   // the same values, as a transposed (non-contiguous) view of a [3, 2] tensor
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

}  // namespace

// ---- Adam / AdamW ------------------------------------------------------------------------------

TEST_CASE("optim: Adam matches the scalar reference, with and without L2 weight decay") {
  compare_adam(DType::f64, {.lr = 0.1}, false, 1e-12);
  compare_adam(DType::f64, {.lr = 0.05, .beta1 = 0.8, .beta2 = 0.99, .eps = 1e-6, .weight_decay = 0.1}, false, 1e-12);
  compare_adam(DType::f32, {.lr = 0.05, .weight_decay = 0.1}, false, 2e-6);
}

TEST_CASE("optim: AdamW matches the scalar reference with decoupled weight decay") {
  compare_adam(DType::f64, {.lr = 0.05, .beta1 = 0.8, .beta2 = 0.99, .eps = 1e-6, .weight_decay = 0.1}, true, 1e-12);
  compare_adam(DType::f32, {.lr = 0.05, .weight_decay = 0.3}, true, 2e-6);
}

TEST_CASE("optim: a non-contiguous parameter (updated through a contiguous copy) gives the same result") {
  compare_adam(DType::f64, {.lr = 0.05, .weight_decay = 0.1}, false, 1e-12, /*contiguous=*/false);
  compare_adam(DType::f64, {.lr = 0.05, .weight_decay = 0.1}, true, 1e-12, /*contiguous=*/false);
}

TEST_CASE("optim: Adam's bias correction makes the first step lr * sign(g)") {
  Tensor p = leaf(kInit);
  Adam opt({{"w", p}}, {.lr = 0.01, .eps = 1e-12});
  const std::vector<double> g = grad_at(0, kInit.size());
  give_grad(p, g);
  opt.step();
  const std::vector<double> after = values(p);
  for (size_t i = 0; i < g.size(); ++i)
    CHECK(after[i] - kInit[i] == doctest::Approx(-0.01 * (g[i] > 0 ? 1 : -1)).epsilon(1e-9));
}

TEST_CASE("optim: Adam and AdamW differ only in where weight decay applies") {
  const AdamOptions o{.lr = 0.1, .weight_decay = 0.5};
  const std::vector<double> zero(kInit.size(), 0.0);
  // With a zero gradient AdamW only shrinks the parameter, by exactly 1 - lr * wd ...
  Tensor pw = leaf(kInit);
  AdamW adamw({{"w", pw}}, o);
  give_grad(pw, zero);
  adamw.step();
  std::vector<double> shrunk = kInit;
  for (double& x : shrunk) x *= 1 - 0.1 * 0.5;
  CHECK(values(pw) == shrunk);
  // ... while Adam feeds wd * p through the moments: a normalized step of lr against sign(p).
  Tensor pa = leaf(kInit);
  Adam adam({{"w", pa}}, o);
  give_grad(pa, zero);
  adam.step();
  const std::vector<double> moved = values(pa);
  for (size_t i = 0; i < kInit.size(); ++i) {
    const double sign = kInit[i] > 0 ? 1 : kInit[i] < 0 ? -1 : 0;
    CHECK(moved[i] == doctest::Approx(kInit[i] - 0.1 * sign).epsilon(1e-6));
  }
  // Without weight decay the two are the same optimizer, bit for bit.
  Tensor p1 = leaf(kInit), p2 = leaf(kInit);
  Adam a1({{"w", p1}}, {.lr = 0.1});
  AdamW a2({{"w", p2}}, {.lr = 0.1});
  for (int k = 0; k < 3; ++k) {
    give_grad(p1, grad_at(k, kInit.size()));
    give_grad(p2, grad_at(k, kInit.size()));
    a1.step();
    a2.step();
  }
  CHECK(values(p1) == values(p2));
}

TEST_CASE("optim: the update is in place, bumps the storage version and keeps the leaf") {
  for (DType dtype : {DType::f32, DType::f64}) {
    Tensor p = leaf(kInit, dtype);
    Tensor y = sum(p * p);                      // saves p for backward
    Adam opt({{"w", p}}, {.lr = 0.1});
    const void* data = p.raw_data();
    const uint64_t version = p.storage()->version();
    give_grad(p, grad_at(0, kInit.size()));
    opt.step();
    CHECK(p.raw_data() == data);
    CHECK(p.storage()->version() > version);
    CHECK(p.is_leaf());
    CHECK(p.requires_grad());
    CHECK(p.grad_fn() == nullptr);
    CHECK_THROWS_AS(y.backward(), AutogradError);   // p changed after y saved it
  }
}

// ---- SGD ---------------------------------------------------------------------------------------

TEST_CASE("optim: SGD matches the scalar reference (plain, momentum, nesterov, weight decay)") {
  const std::vector<SGDOptions> configs = {
      {.lr = 0.1},
      {.lr = 0.1, .weight_decay = 0.05},
      {.lr = 0.1, .momentum = 0.9},
      {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.05},
      {.lr = 0.1, .momentum = 0.8, .weight_decay = 0.05, .nesterov = true},
  };
  for (DType dtype : {DType::f64, DType::f32})
    for (const SGDOptions& o : configs) {
      INFO("dtype " << dtype_name(dtype) << " momentum " << o.momentum << " wd " << o.weight_decay
                    << " nesterov " << o.nesterov);
      Tensor p = leaf(kInit, dtype);
      SGD opt({{"w", p}}, o);
      SGDRef ref(kInit);
      for (int k = 0; k < 5; ++k) {
        give_grad(p, grad_at(k, kInit.size()));
        opt.step();
        ref.step(grad_at(k, kInit.size()), o.lr, o);
        check_close(values(p), ref.p, dtype == DType::f64 ? 1e-13 : 1e-6);
      }
    }
}

TEST_CASE("optim: SGD on a non-contiguous parameter matches the reference") {
  const SGDOptions o{.lr = 0.1, .momentum = 0.8, .weight_decay = 0.05, .nesterov = true};
  Tensor p = from_vector(kInit, {2, 3}).transpose(0, 1).contiguous().transpose(0, 1).detach();
  p.set_requires_grad();
  REQUIRE_FALSE(p.is_contiguous());
  SGD opt({{"w", p}}, o);
  SGDRef ref(kInit);
  for (int k = 0; k < 4; ++k) {
    give_grad(p, grad_at(k, kInit.size()));
    opt.step();
    ref.step(grad_at(k, kInit.size()), o.lr, o);
    check_close(values(p), ref.p, 1e-13);
  }
}

TEST_CASE("optim: large parameters (the multi-threaded loop) match the references") {
  const size_t n = 100003;
  std::vector<double> init(n);
  for (size_t i = 0; i < n; ++i) init[i] = std::cos(0.01 * double(i));
  auto big_leaf = [&] { return from_vector(init, {int64_t(n)}).detach().set_requires_grad(); };
  Tensor pa = big_leaf(), ps = big_leaf();
  const AdamOptions ao{.lr = 0.01, .weight_decay = 0.1};
  const SGDOptions so{.lr = 0.01, .momentum = 0.9, .weight_decay = 0.1, .nesterov = true};
  AdamW adamw({{"w", pa}}, ao);
  SGD sgd({{"w", ps}}, so);
  AdamRef aref(init);
  SGDRef sref(init);
  for (int k = 0; k < 3; ++k) {
    const std::vector<double> g = grad_at(k, n);
    give_grad(pa, g);
    give_grad(ps, g);
    adamw.step();
    sgd.step();
    aref.step(g, ao.lr, ao, /*decoupled=*/true);
    sref.step(g, so.lr, so);
  }
  const std::vector<double> a = values(pa), s = values(ps);
  double worst_a = 0, worst_s = 0;
  for (size_t i = 0; i < n; ++i) {
    worst_a = std::max(worst_a, std::abs(a[i] - aref.p[i]));
    worst_s = std::max(worst_s, std::abs(s[i] - sref.p[i]));
  }
  CHECK(worst_a < 1e-12);
  CHECK(worst_s < 1e-12);
  double sq = 0;
  for (double x : grad_at(2, n)) sq += x * x;
  CHECK(clip_grad_norm({{"a", pa}}, 1.0) == doctest::Approx(std::sqrt(sq)).epsilon(1e-12));
}

TEST_CASE("optim: SGD's first momentum step uses the gradient itself") {
  Tensor p = leaf(kInit);
  SGD opt({{"w", p}}, {.lr = 1.0, .momentum = 0.9});
  const std::vector<double> g = grad_at(0, kInit.size());
  give_grad(p, g);
  opt.step();
  NamedTensors state = opt.state_dict();
  REQUIRE(state.size() == 3);
  CHECK(state[2].first == "momentum_buffer.w");
  CHECK(values(state[2].second) == g);
}

// ---- skipping, zero_grad, lazy state -----------------------------------------------------------

TEST_CASE("optim: parameters without a grad are skipped and get their own bias correction later") {
  Tensor a = leaf(kInit), b = leaf(kInit);
  Adam opt({{"a", a}, {"b", b}}, {.lr = 0.01, .eps = 1e-12});
  CHECK(opt.state_dict().size() == 1);          // only "step": moments are created lazily
  for (int k = 0; k < 3; ++k) {
    give_grad(a, grad_at(k, kInit.size()));
    opt.step();
  }
  CHECK(values(b) == kInit);
  NamedTensors state = opt.state_dict();
  for (const auto& entry : state) CHECK(entry.first.find(".b") == std::string::npos);
  // b's first update is a first Adam step (t = 1 for b): lr * sign(g).
  const std::vector<double> g = grad_at(7, kInit.size());
  give_grad(b, g);
  a.zero_grad();
  const std::vector<double> a_before = values(a);
  opt.step();
  CHECK(values(a) == a_before);
  const std::vector<double> after = values(b);
  for (size_t i = 0; i < g.size(); ++i)
    CHECK(after[i] - kInit[i] == doctest::Approx(-0.01 * (g[i] > 0 ? 1 : -1)).epsilon(1e-9));
}

TEST_CASE("optim: zero_grad drops every grad and state buffers follow the parameter dtype") {
  Tensor a = leaf(kInit, DType::f32), b = leaf(kInit, DType::f32);
  Adam opt({{"a", a}, {"b", b}});
  give_grad(a, grad_at(0, 6));
  give_grad(b, grad_at(1, 6));
  opt.step();
  for (const auto& [name, t] : opt.state_dict())
    if (name != "step" && name.rfind("step.", 0) != 0) {
      CHECK(t.dtype() == DType::f32);
      CHECK(t.shape() == Shape{2, 3});
    }
  opt.zero_grad();
  CHECK_FALSE(a.grad().defined());
  CHECK_FALSE(b.grad().defined());
}

// ---- state_dict --------------------------------------------------------------------------------

// Trains 3 steps, saves, trains 2 more; then restores the saved state (and parameter values)
// into a fresh optimizer and trains the same 2 steps: the parameters must be bit-identical.
template <class Opt, class Options>
void check_round_trip(const Options& o, DType dtype) {
  Tensor p = leaf(kInit, dtype);
  Opt opt({{"w", p}}, o);
  for (int k = 0; k < 3; ++k) {
    give_grad(p, grad_at(k, kInit.size()));
    opt.step();
  }
  const NamedTensors saved = opt.state_dict();
  const Tensor saved_p = p.detach().clone();
  const std::vector<double> saved_values = values(saved.back().second);
  for (int k = 3; k < 5; ++k) {
    give_grad(p, grad_at(k, kInit.size()));
    opt.step();
  }
  CHECK(values(saved.back().second) == saved_values);   // a snapshot, not a live view

  Tensor q = saved_p.clone().detach().set_requires_grad();
  Opt fresh({{"w", q}}, o);
  fresh.load_state_dict(saved);
  CHECK(fresh.steps() == 3);
  for (int k = 3; k < 5; ++k) {
    give_grad(q, grad_at(k, kInit.size()));
    fresh.step();
  }
  CHECK(fresh.steps() == 5);
  CHECK(values(q) == values(p));
}

TEST_CASE("optim: state_dict round trip continues bit-identically") {
  check_round_trip<Adam>(AdamOptions{.lr = 0.05, .weight_decay = 0.1}, DType::f32);
  check_round_trip<AdamW>(AdamOptions{.lr = 0.05, .weight_decay = 0.1}, DType::f64);
  check_round_trip<SGD>(SGDOptions{.lr = 0.05, .momentum = 0.9, .nesterov = true}, DType::f32);
}

TEST_CASE("optim: state_dict names its entries and stores the step as a 0-dim int64") {
  Tensor p = leaf(kInit);
  Adam opt({{"w", p}});
  give_grad(p, grad_at(0, 6));
  opt.step();
  opt.step();
  const NamedTensors state = opt.state_dict();
  std::vector<std::string> names;
  for (const auto& entry : state) names.push_back(entry.first);
  CHECK(names == std::vector<std::string>{"step", "step.w", "exp_avg.w", "exp_avg_sq.w"});
  CHECK(state[0].second.dim() == 0);
  CHECK(state[0].second.dtype() == DType::i64);
  CHECK(state[0].second.item<int64_t>() == 2);
}

TEST_CASE("optim: load_state_dict names the missing, unexpected or mis-shaped entry and changes nothing") {
  Tensor p = leaf(kInit);
  Adam opt({{"w", p}});
  give_grad(p, grad_at(0, 6));
  opt.step();
  const NamedTensors good = opt.state_dict();
  auto without = [&](const std::string& name) {
    NamedTensors s;
    for (const auto& e : good)
      if (e.first != name) s.push_back(e);
    return s;
  };
  Adam other({{"w", leaf(kInit)}});
  CHECK_THROWS_WITH_AS(other.load_state_dict(without("exp_avg_sq.w")), doctest::Contains("'exp_avg_sq.w'"),
                       ValueError);
  CHECK_THROWS_WITH_AS(other.load_state_dict(without("step")), doctest::Contains("'step'"), ValueError);
  CHECK_THROWS_WITH_AS(other.load_state_dict(without("step.w")), doctest::Contains("'step.w'"), ValueError);

  NamedTensors bad_shape = good;
  bad_shape[2].second = zeros({6}, DType::f64);
  CHECK_THROWS_WITH_AS(other.load_state_dict(bad_shape), doctest::Contains("'exp_avg.w' has shape [6]"), ValueError);

  NamedTensors extra = good;
  extra.emplace_back("momentum_buffer.w", zeros({2, 3}, DType::f64));
  CHECK_THROWS_WITH_AS(other.load_state_dict(extra), doctest::Contains("unexpected entry 'momentum_buffer.w'"),
                       ValueError);
  Adam renamed({{"v", leaf(kInit)}});
  CHECK_THROWS_WITH_AS(renamed.load_state_dict(good), doctest::Contains("unexpected entry"), ValueError);
  CHECK(other.steps() == 0);
  CHECK(other.state_dict().size() == 1);
  other.load_state_dict(good);
  CHECK(other.steps() == 1);
}

// ---- parameter groups --------------------------------------------------------------------------

namespace {

// A GPT-like parameter list: matrices and an embedding (dim >= 2), a bias, a LayerNorm weight
// and a 0-dim scale (dim < 2), interleaved.
NamedTensors gpt_like_params() {
  auto param = [](const Shape& shape, double phase) {
    std::vector<double> v(size_t(numel(shape)));
    for (size_t i = 0; i < v.size(); ++i) v[i] = std::cos(0.9 * double(i) + phase);
    return from_vector(v, shape).detach().set_requires_grad();
  };
  return {{"wte", param({5, 3}, 0.1)}, {"ln.weight", param({3}, 0.2)}, {"fc.weight", param({3, 4}, 0.3)},
          {"fc.bias", param({4}, 0.4)}, {"scale", param({}, 0.5)}};
}

void give_grads(const NamedTensors& params, int step) {
  for (size_t k = 0; k < params.size(); ++k) {
    Tensor p = params[k].second;
    give_grad(p, grad_at(step + int(k), size_t(p.numel())));
  }
}

NamedTensors subset(const NamedTensors& params, const std::vector<std::string>& names) {
  NamedTensors out;
  for (const auto& entry : params)
    if (std::find(names.begin(), names.end(), entry.first) != names.end()) out.push_back(entry);
  return out;
}

// A fresh copy of `params` (same names, values and shapes), as new leaves.
NamedTensors copy_of(const NamedTensors& params) {
  NamedTensors out;
  for (const auto& [name, p] : params) out.emplace_back(name, p.detach().clone().set_requires_grad());
  return out;
}

}  // namespace

TEST_CASE("optim: weight_decay_groups decays tensors with 2+ dims and nothing else") {
  const NamedTensors params = gpt_like_params();
  const std::vector<ParamGroup> groups = weight_decay_groups(params, 0.1);
  REQUIRE(groups.size() == 2);
  std::vector<std::string> decayed, plain;
  for (const auto& entry : groups[0].params) decayed.push_back(entry.first);
  for (const auto& entry : groups[1].params) plain.push_back(entry.first);
  CHECK(decayed == std::vector<std::string>{"wte", "fc.weight"});
  CHECK(plain == std::vector<std::string>{"ln.weight", "fc.bias", "scale"});
  CHECK(groups[0].weight_decay == 0.1);
  CHECK(groups[1].weight_decay == 0.0);
  CHECK(weight_decay_groups(subset(params, {"wte"}), 0.1).size() == 1);   // no empty group
}

TEST_CASE("optim: a group's weight decay overrides the optimizer's") {
  for (bool decoupled : {false, true}) {
    INFO("decoupled " << decoupled);
    Tensor a = leaf(kInit), b = leaf(kInit);
    const AdamOptions o{.lr = 0.05, .weight_decay = 0.1};
    std::vector<ParamGroup> groups = {{{{"a", a}}, 0.4}, {{{"b", b}}, std::nullopt}};
    std::unique_ptr<Adam> opt = decoupled ? std::make_unique<AdamW>(groups, o) : std::make_unique<Adam>(groups, o);
    AdamOptions oa = o;
    oa.weight_decay = 0.4;
    AdamRef ra(kInit), rb(kInit);
    for (int k = 0; k < 3; ++k) {
      give_grad(a, grad_at(k, kInit.size()));
      give_grad(b, grad_at(k, kInit.size()));
      opt->step();
      ra.step(grad_at(k, kInit.size()), o.lr, oa, decoupled);
      rb.step(grad_at(k, kInit.size()), o.lr, o, decoupled);
    }
    check_close(values(a), ra.p, 1e-12);
    check_close(values(b), rb.p, 1e-12);
  }
  const SGDOptions so{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.05};
  Tensor a = leaf(kInit), b = leaf(kInit);
  SGD sgd(std::vector<ParamGroup>{{{{"a", a}}, 0.0}, {{{"b", b}}, std::nullopt}}, so);
  SGDOptions no_decay = so;
  no_decay.weight_decay = 0;
  SGDRef ra(kInit), rb(kInit);
  for (int k = 0; k < 3; ++k) {
    give_grad(a, grad_at(k, kInit.size()));
    give_grad(b, grad_at(k, kInit.size()));
    sgd.step();
    ra.step(grad_at(k, kInit.size()), so.lr, no_decay);
    rb.step(grad_at(k, kInit.size()), so.lr, so);
  }
  check_close(values(a), ra.p, 1e-13);
  check_close(values(b), rb.p, 1e-13);
}

TEST_CASE("optim: one step over two groups equals two single-group optimizers, bit for bit") {
  const NamedTensors grouped = gpt_like_params(), decayed = copy_of(grouped), plain = copy_of(grouped);
  const AdamOptions o{.lr = 0.02, .beta2 = 0.95, .weight_decay = 0.1};
  AdamW together(weight_decay_groups(grouped, o.weight_decay), o);
  const NamedTensors d = subset(decayed, {"wte", "fc.weight"}), p = subset(plain, {"ln.weight", "fc.bias", "scale"});
  AdamOptions o0 = o;
  o0.weight_decay = 0;
  AdamW apart_decayed(d, o), apart_plain(p, o0);
  for (int k = 0; k < 4; ++k) {
    give_grads(grouped, k);
    give_grads(decayed, k);
    give_grads(plain, k);
    together.step();
    apart_decayed.step();
    apart_plain.step();
  }
  CHECK(together.params().size() == 5);
  for (const auto& [name, t] : grouped) {
    INFO(name);
    const NamedTensors& other = subset(d, {name}).empty() ? p : d;
    CHECK(values(t) == values(subset(other, {name})[0].second));
  }
}

TEST_CASE("optim: state_dict round-trips with groups and does not depend on them") {
  const NamedTensors params = gpt_like_params();
  const AdamOptions o{.lr = 0.02, .weight_decay = 0.1};
  AdamW opt(weight_decay_groups(params, o.weight_decay), o);
  for (int k = 0; k < 3; ++k) {
    give_grads(params, k);
    if (k == 1) Tensor(params[1].second).zero_grad();   // ln.weight: its own update count
    opt.step();
  }
  const NamedTensors saved = opt.state_dict();
  CHECK(saved.size() == 1 + 5 * 3);
  CHECK(saved[0].first == "step");
  CHECK(saved[1].first == "step.wte");         // group order: the decayed group first
  CHECK(saved[4].first == "step.fc.weight");
  CHECK(saved[7].first == "step.ln.weight");
  CHECK(saved[7].second.item<int64_t>() == 2);
  const NamedTensors resumed = copy_of(params);
  for (int k = 3; k < 5; ++k) {
    give_grads(params, k);
    opt.step();
  }
  AdamW fresh(weight_decay_groups(resumed, o.weight_decay), o);
  fresh.load_state_dict(saved);
  for (int k = 3; k < 5; ++k) {
    give_grads(resumed, k);
    fresh.step();
  }
  for (size_t i = 0; i < params.size(); ++i) CHECK(values(resumed[i].second) == values(params[i].second));
  // The entries name parameters, not groups: one group loads the same state.
  AdamW single(copy_of(params), o);
  single.load_state_dict(saved);
  CHECK(single.steps() == 3);
}

TEST_CASE("optim: a step makes one op call per group and update count") {
  autograd::set_profiling_enabled(true);
  autograd::reset_profile();
  Tensor a = leaf(kInit), b = leaf(kInit), c = leaf(kInit), d = leaf(kInit), e = leaf(kInit);
  Adam opt(std::vector<ParamGroup>{{{{"a", a}, {"b", b}, {"c", c}}, std::nullopt}, {{{"d", d}, {"e", e}}, 0.0}},
           {.lr = 0.01});
  for (Tensor* t : {&a, &b, &d}) give_grad(*t, grad_at(0, kInit.size()));
  opt.step();                                   // group 0: a, b (count 1); group 1: d (count 1)
  const int64_t first = autograd::profiled_calls("adam_update");
  for (Tensor* t : {&a, &b, &c, &d, &e}) give_grad(*t, grad_at(1, kInit.size()));
  opt.step();                                   // group 0: a, b (2) and c (1); group 1: d (2) and e (1)
  const int64_t second = autograd::profiled_calls("adam_update") - first;
  clip_grad_norm(opt.params(), 1.0);
  const int64_t clips = autograd::profiled_calls("clip_grad_norm");
  autograd::set_profiling_enabled(false);
  CHECK(first == 2);
  CHECK(second == 4);
  CHECK(clips == 1);
}

// ---- argument checks ---------------------------------------------------------------------------

TEST_CASE("optim: bad parameters and options throw ValueError") {
  CHECK_THROWS_WITH_AS(Adam(NamedTensors{}), doctest::Contains("empty parameter list"), ValueError);
  CHECK_THROWS_WITH_AS(Adam({{"w", leaf(kInit)}, {"w", leaf(kInit)}}), doctest::Contains("'w' appears twice"),
                       ValueError);
  CHECK_THROWS_WITH_AS(Adam(std::vector<ParamGroup>{{{{"w", leaf(kInit)}}, {}}, {{{"w", leaf(kInit)}}, {}}}),
                       doctest::Contains("'w' appears twice"), ValueError);
  CHECK_THROWS_WITH_AS(SGD(std::vector<ParamGroup>{{{{"w", leaf(kInit)}}, -0.5}}),
                       doctest::Contains("group 0's weight_decay must be finite and >= 0"), ValueError);
  CHECK_THROWS_WITH_AS(SGD({{"w", from_vector(kInit)}}), doctest::Contains("requires grad"), ValueError);
  CHECK_THROWS_WITH_AS(SGD({{"i", zeros({3}, DType::i64)}}), doctest::Contains("float32 or float64"), ValueError);
  CHECK_THROWS_WITH_AS(Adam({{"w", leaf(kInit)}}, {.beta1 = 1.0}), doctest::Contains("beta1"), ValueError);
  CHECK_THROWS_WITH_AS(Adam({{"w", leaf(kInit)}}, {.beta2 = -0.1}), doctest::Contains("beta2"), ValueError);
  CHECK_THROWS_WITH_AS(AdamW({{"w", leaf(kInit)}}, {.eps = -1}), doctest::Contains("eps"), ValueError);
  CHECK_THROWS_WITH_AS(AdamW({{"w", leaf(kInit)}}, {.weight_decay = -1}), doctest::Contains("weight_decay"),
                       ValueError);
  CHECK_THROWS_WITH_AS(Adam({{"w", leaf(kInit)}}, {.lr = -1}), doctest::Contains("learning rate"), ValueError);
  CHECK_THROWS_WITH_AS(SGD({{"w", leaf(kInit)}}, {.nesterov = true}), doctest::Contains("nesterov"), ValueError);
  CHECK_THROWS_WITH_AS(SGD({{"w", leaf(kInit)}}, {.momentum = -0.5}), doctest::Contains("momentum"), ValueError);
  SGD opt({{"w", leaf(kInit)}});
  CHECK_THROWS_AS(opt.set_lr(std::nan("")), ValueError);
  opt.set_lr(0.5);
  CHECK(opt.lr() == 0.5);
}

// ---- schedules ---------------------------------------------------------------------------------

TEST_CASE("optim: CosineWarmup warms up linearly, then follows a cosine to min_lr") {
  const CosineWarmup s(1.0, 10, 110, 0.1);
  CHECK(s.lr_at(0) == doctest::Approx(0.1));    // (0 + 1) / 10
  CHECK(s.lr_at(4) == doctest::Approx(0.5));
  CHECK(s.lr_at(9) == doctest::Approx(1.0));    // warmup end
  CHECK(s.lr_at(10) == doctest::Approx(1.0));   // cosine start
  CHECK(s.lr_at(60) == doctest::Approx(0.55));  // halfway: (base + min) / 2
  CHECK(s.lr_at(35) == doctest::Approx(0.1 + 0.45 * (1 + std::cos(std::numbers::pi / 4))));
  CHECK(s.lr_at(110) == doctest::Approx(0.1));
  CHECK(s.lr_at(5000) == 0.1);
  CHECK(s.lr_at(59) > s.lr_at(61));
  const CosineWarmup no_warmup(2.0, 0, 4);
  CHECK(no_warmup.lr_at(0) == doctest::Approx(2.0));
  CHECK(no_warmup.lr_at(2) == doctest::Approx(1.0));
  CHECK(no_warmup.lr_at(4) == doctest::Approx(0.0));
}

TEST_CASE("optim: MultiStepLR and ConstantLR") {
  const MultiStepLR s(1.0, {3, 6}, 0.5);
  CHECK(s.lr_at(0) == 1.0);
  CHECK(s.lr_at(2) == 1.0);
  CHECK(s.lr_at(3) == 0.5);
  CHECK(s.lr_at(5) == 0.5);
  CHECK(s.lr_at(6) == 0.25);
  CHECK(s.lr_at(1000) == 0.25);
  CHECK(MultiStepLR(0.3, {}).lr_at(10) == 0.3);
  CHECK(ConstantLR(0.25).lr_at(12345) == 0.25);
  // A schedule drives the optimizer through set_lr.
  Tensor p = leaf(kInit);
  SGD opt({{"w", p}}, {.lr = 1.0});
  opt.set_lr(s.lr_at(4));
  CHECK(opt.lr() == 0.5);
}

TEST_CASE("optim: schedules reject bad arguments") {
  CHECK_THROWS_WITH_AS(CosineWarmup(1.0, 10, 10), doctest::Contains("total_steps"), ValueError);
  CHECK_THROWS_WITH_AS(CosineWarmup(1.0, -1, 10), doctest::Contains("warmup_steps"), ValueError);
  CHECK_THROWS_WITH_AS(CosineWarmup(0.1, 1, 10, 0.2), doctest::Contains("min_lr"), ValueError);
  CHECK_THROWS_WITH_AS(CosineWarmup(-1.0, 1, 10), doctest::Contains("base_lr"), ValueError);
  CHECK_THROWS_WITH_AS(CosineWarmup(1.0, 1, 10).lr_at(-1), doctest::Contains("step >= 0"), ValueError);
  CHECK_THROWS_WITH_AS(MultiStepLR(1.0, {5, 3}), doctest::Contains("strictly increasing"), ValueError);
  CHECK_THROWS_WITH_AS(MultiStepLR(1.0, {-2}), doctest::Contains("negative"), ValueError);
  CHECK_THROWS_WITH_AS(MultiStepLR(1.0, {2}, 0.0), doctest::Contains("gamma"), ValueError);
  CHECK_THROWS_WITH_AS(ConstantLR(std::nan("")), doctest::Contains("lr"), ValueError);
}

// ---- clip_grad_norm ----------------------------------------------------------------------------

TEST_CASE("optim: clip_grad_norm returns the global norm and scales grads above max_norm") {
  for (DType dtype : {DType::f64, DType::f32}) {
    Tensor a = from_vector(std::vector<double>{3, 4}, {2}).to(dtype).set_requires_grad();
    Tensor b = from_vector(std::vector<double>{0, 0, 0, 0}, {2, 2}).to(dtype).set_requires_grad();
    Tensor c = zeros({3}, dtype).set_requires_grad();   // no grad: ignored
    a.set_grad(from_vector(std::vector<double>{3, 4}, {2}).to(dtype));
    // b's grad is a transposed view: it is clipped through a contiguous copy.
    b.set_grad(from_vector(std::vector<double>{12, 0, 0, 0}, {2, 2}).to(dtype).transpose(0, 1));
    const NamedTensors params = {{"a", a}, {"b", b}, {"c", c}};

    CHECK(clip_grad_norm(params, 100.0) == doctest::Approx(13.0));
    CHECK(values(a.grad()) == std::vector<double>{3, 4});   // below max_norm: untouched

    CHECK(clip_grad_norm(params, 6.5) == doctest::Approx(13.0));
    const double f = 6.5 / (13.0 + 1e-6);
    check_close(values(a.grad()), {3 * f, 4 * f}, 1e-6);
    check_close(values(b.grad()), {12 * f, 0, 0, 0}, 1e-6);
    CHECK(clip_grad_norm(params, 1e9) == doctest::Approx(6.5).epsilon(1e-6));
    CHECK_FALSE(c.grad().defined());
  }
}

TEST_CASE("optim: clip_grad_norm leaves grads alone when the norm is not finite") {
  Tensor a = zeros({3}, DType::f32).set_requires_grad();
  a.set_grad(from_vector(std::vector<float>{1, INFINITY, 2}));
  CHECK(std::isinf(clip_grad_norm({{"a", a}}, 1.0)));
  CHECK(values(a.grad())[0] == 1.0);
  a.set_grad(from_vector(std::vector<float>{1, NAN, 2}));
  CHECK(std::isnan(clip_grad_norm({{"a", a}}, 1.0)));
  CHECK(values(a.grad())[2] == 2.0);
  CHECK_THROWS_WITH_AS(clip_grad_norm({{"a", a}}, 0.0), doctest::Contains("max_norm"), ValueError);
  CHECK_THROWS_AS(clip_grad_norm({{"a", a}}, -1.0), ValueError);
}
