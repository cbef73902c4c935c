// Tests of parameter groups (train/optim/optimizer.h): weight_decay_groups, per-group weight
// decay, steps over several groups, the op calls a step makes, and the argument checks.
#include <doctest/doctest.h>

#include <cmath>

#include "autograd/autograd.h"
#include "autograd/profiler.h"
#include "tests/train/optim/optim_reference.h"
#include "train/optim/adam.h"
#include "train/optim/clip.h"
#include "train/optim/sgd.h"

using namespace qkv;
using namespace qkv::optim;
using namespace qkv::test;

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
  return {{"wte", param({5, 3}, 0.1)},
          {"ln.weight", param({3}, 0.2)},
          {"fc.weight", param({3, 4}, 0.3)},
          {"fc.bias", param({4}, 0.4)},
          {"scale", param({}, 0.5)}};
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
  CHECK(weight_decay_groups(subset(params, {"wte"}), 0.1).size() == 1);  // no empty group
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
    if (k == 1) Tensor(params[1].second).zero_grad();  // ln.weight: its own update count
    opt.step();
  }
  const NamedTensors saved = opt.state_dict();
  CHECK(saved.size() == 1 + 5 * 3);
  CHECK(saved[0].first == "step");
  CHECK(saved[1].first == "step.wte");  // group order: the decayed group first
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
  opt.step();  // group 0: a, b (count 1); group 1: d (count 1)
  const int64_t first = autograd::profiled_calls("adam_update");
  for (Tensor* t : {&a, &b, &c, &d, &e}) give_grad(*t, grad_at(1, kInit.size()));
  opt.step();  // group 0: a, b (2) and c (1); group 1: d (2) and e (1)
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
