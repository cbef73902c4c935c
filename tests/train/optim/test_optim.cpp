// Tests of the optimizers' update rules (train/optim/): Adam, AdamW and SGD against the scalar
// reference loops of optim_reference.h, non-contiguous and skipped parameters, zero_grad, and
// state_dict round trips and their errors.
#include <doctest/doctest.h>

#include <cmath>

#include "autograd/autograd.h"
#include "tests/train/optim/optim_reference.h"
#include "train/optim/adam.h"
#include "train/optim/clip.h"
#include "train/optim/sgd.h"

using namespace qkv;
using namespace qkv::optim;
using namespace qkv::test;

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
    Tensor y = sum(p * p);  // saves p for backward
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
    CHECK_THROWS_AS(y.backward(), AutogradError);  // p changed after y saved it
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
      INFO("dtype " << dtype_name(dtype) << " momentum " << o.momentum << " wd " << o.weight_decay << " nesterov "
                    << o.nesterov);
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
  CHECK(clip_grad_norm({{"a", pa}}, 1.0).item<double>() == doctest::Approx(std::sqrt(sq)).epsilon(1e-12));
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
  CHECK(opt.state_dict().size() == 1);  // only "step": moments are created lazily
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
template <class Opt, class Options> void check_round_trip(const Options& o, DType dtype) {
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
  CHECK(values(saved.back().second) == saved_values);  // a snapshot, not a live view

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
  CHECK_THROWS_WITH_AS(other.load_state_dict(without("exp_avg_sq.w")), doctest::Contains("'exp_avg_sq.w'"), ValueError);
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
