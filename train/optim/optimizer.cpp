// The Optimizer base class: parameter and group checks, the step loop (skip undefined grads,
// create buffers lazily, count updates, batch each group's parameters by update count for one
// op call per batch), zero_grad, the learning rate, and state_dict save / restore.
#include "train/optim/optimizer.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "autograd/grad_mode.h"
#include "tensor/view.h"

namespace qkv::optim {

const char* decay_rule_name(DecayRule r) { return r == DecayRule::all ? "all" : "matrices"; }

std::vector<ParamGroup> weight_decay_groups(const NamedTensors& params, double weight_decay, DecayRule rule) {
  ParamGroup decayed{{}, weight_decay}, plain{{}, 0.0};
  for (const auto& entry : params)
    (rule == DecayRule::all || entry.second.dim() >= 2 ? decayed : plain).params.push_back(entry);
  std::vector<ParamGroup> groups;
  for (ParamGroup* g : {&decayed, &plain})
    if (!g->params.empty()) groups.push_back(std::move(*g));
  return groups;
}

namespace {

void check_param(const std::string& opt, const std::string& name, const Tensor& p) {
  check<ValueError>(!name.empty(), opt, ": every parameter needs a non-empty name");
  check<ValueError>(p.defined(), opt, ": parameter '", name, "' is an undefined tensor");
  check<ValueError>(p.dtype() == DType::f32 || p.dtype() == DType::f64, opt, ": parameter '", name, "' has dtype ",
                    dtype_name(p.dtype()), "; optimizers update float32 or float64 tensors");
  check<ValueError>(p.requires_grad() && p.is_leaf(), opt, ": parameter '", name,
                    "' must be a leaf tensor that requires grad (call set_requires_grad() on it)");
}

void check_weight_decay(const std::string& opt, const std::string& what, double wd) {
  check<ValueError>(std::isfinite(wd) && wd >= 0, opt, ": ", what, " must be finite and >= 0, got ", wd);
}

Tensor count_tensor(int64_t n) { return from_vector(std::vector<int64_t>{n}, Shape{}); }

// Reads a one-element integer entry of a state dict (a step count) and checks it is >= lo.
int64_t read_count(const std::string& opt, const std::string& key, const Tensor& t, int64_t lo) {
  check<ValueError>(t.numel() == 1 && (t.dtype() == DType::i64 || t.dtype() == DType::i32), opt,
                    ": load_state_dict(): entry '", key, "' must be a one-element integer tensor, got ",
                    dtype_name(t.dtype()), " ", shape_str(t.shape()));
  const int64_t n = t.item<int64_t>();
  check<ValueError>(n >= lo, opt, ": load_state_dict(): entry '", key, "' is ", n, "; expected at least ", lo);
  return n;
}

// A fresh contiguous copy of `src` on `like`'s device and dtype.
Tensor copy_like(const Tensor& src, const Tensor& like) {
  Tensor out = empty(like.shape(), {like.dtype(), like.device()});
  out.copy_(src);
  return out;
}

}  // namespace

Optimizer::Optimizer(std::string name, std::vector<ParamGroup> groups, double lr, double weight_decay)
    : name_(std::move(name)) {
  check_weight_decay(name_, "weight_decay", weight_decay);
  std::set<std::string> seen;
  for (size_t g = 0; g < groups.size(); ++g) {
    if (groups[g].weight_decay) check_weight_decay(name_, cat("group ", g, "'s weight_decay"), *groups[g].weight_decay);
    for (const auto& [pname, p] : groups[g].params) {
      check_param(name_, pname, p);
      check<ValueError>(seen.insert(pname).second, name_, ": parameter name '", pname, "' appears twice");
    }
    groups_.push_back(
        {params_.size(), params_.size() + groups[g].params.size(), groups[g].weight_decay.value_or(weight_decay)});
    for (auto& entry : groups[g].params) params_.push_back(std::move(entry));
  }
  check<ValueError>(!params_.empty(), name_, ": got an empty parameter list");
  states_.resize(params_.size());
  set_lr(lr);
}

void Optimizer::set_lr(double lr) {
  check<ValueError>(std::isfinite(lr) && lr >= 0, name_, ": learning rate must be finite and >= 0, got ", lr);
  lr_ = lr;
}

void Optimizer::zero_grad() {
  for (auto& entry : params_) entry.second.zero_grad();
}

void Optimizer::step() {
  NoGradGuard no_grad;
  for (const auto& [pname, p] : params_) {  // checked before anything changes
    const Tensor g = p.grad();
    if (g.defined())
      check<DTypeError>(g.dtype() == p.dtype(), name_, ": parameter '", pname, "' is ", dtype_name(p.dtype()),
                        " but its grad is ", dtype_name(g.dtype()));
  }
  const std::vector<std::string> buffers = buffer_names();
  for (const GroupRange& group : groups_) step_group(group, buffers);
  ++steps_;
}

// The group's parameters with a grad, batched by update count (bias correction depends on it),
// one update() per batch. The update ops write contiguous tensors only: a non-contiguous
// parameter is updated through a contiguous copy, written back after its batch.
void Optimizer::step_group(const GroupRange& group, const std::vector<std::string>& buffers) {
  struct Pending {
    Batch batch;
    std::vector<std::pair<Tensor, Tensor>> staged;  // (parameter, its contiguous copy)
  };
  std::map<int64_t, Pending> batches;
  for (size_t i = group.begin; i < group.end; ++i) {
    const Tensor& p = params_[i].second;
    const Tensor g = p.grad();
    if (!g.defined()) continue;
    ParamState& s = states_[i];
    if (s.step == 0) {
      s.buffers.clear();
      for (size_t b = 0; b < buffers.size(); ++b) s.buffers.push_back(zeros(p.shape(), {p.dtype(), p.device()}));
    }
    ++s.step;
    Pending& pending = batches[s.step];
    Batch& batch = pending.batch;
    batch.step = s.step;
    batch.weight_decay = group.weight_decay;
    if (p.is_contiguous()) {
      batch.params.push_back(p);
    } else {
      pending.staged.emplace_back(p, raw::contiguous(p));
      batch.params.push_back(pending.staged.back().second);
    }
    batch.grads.push_back(g);
    batch.buffers.push_back(s.buffers);
  }
  for (auto& [count, pending] : batches) {
    update(pending.batch);
    for (auto& [p, copy] : pending.staged) p.copy_(copy);
  }
}

NamedTensors Optimizer::state_dict() const {
  NoGradGuard no_grad;
  const std::vector<std::string> buffers = buffer_names();
  NamedTensors out{{"step", count_tensor(steps_)}};
  for (size_t i = 0; i < params_.size(); ++i) {
    const ParamState& s = states_[i];
    if (s.step == 0) continue;
    const std::string& pname = params_[i].first;
    out.emplace_back("step." + pname, count_tensor(s.step));
    for (size_t b = 0; b < buffers.size(); ++b) out.emplace_back(buffers[b] + "." + pname, s.buffers[b].clone());
  }
  return out;
}

void Optimizer::load_state_dict(const NamedTensors& state) {
  NoGradGuard no_grad;
  Restored restored = restore(state);  // throws before anything changes
  steps_ = restored.steps;
  states_ = std::move(restored.states);
}

// Checks every entry of `state` and builds the step count and per-parameter states from it;
// changes nothing.
Optimizer::Restored Optimizer::restore(const NamedTensors& state) const {
  const std::string where = name_ + ": load_state_dict()";
  std::map<std::string, const Tensor*> entries;
  for (const auto& [key, t] : state) {
    check<ValueError>(t.defined(), where, ": entry '", key, "' is an undefined tensor");
    check<ValueError>(entries.emplace(key, &t).second, where, ": entry '", key, "' appears twice");
  }
  auto take = [&](const std::string& key) -> const Tensor* {
    auto it = entries.find(key);
    if (it == entries.end()) return nullptr;
    const Tensor* t = it->second;
    entries.erase(it);
    return t;
  };
  const Tensor* global = take("step");
  check<ValueError>(global != nullptr, where, ": missing entry 'step'");
  const int64_t steps = read_count(name_, "step", *global, 0);

  const std::vector<std::string> buffers = buffer_names();
  std::vector<ParamState> out(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto& [pname, p] = params_[i];
    const std::string step_key = "step." + pname;
    const Tensor* count = take(step_key);
    std::vector<const Tensor*> found;
    for (const std::string& b : buffers) found.push_back(take(b + "." + pname));
    const bool any = count || std::any_of(found.begin(), found.end(), [](const Tensor* t) { return t; });
    if (!any) continue;  // this parameter has not been updated yet
    check<ValueError>(count != nullptr, where, ": missing entry '", step_key, "' (parameter '", pname,
                      "' has buffers but no update count)");
    out[i].step = read_count(name_, step_key, *count, 1);
    for (size_t b = 0; b < buffers.size(); ++b) {
      const std::string key = buffers[b] + "." + pname;
      check<ValueError>(found[b] != nullptr, where, ": missing entry '", key, "'");
      check<ValueError>(found[b]->shape() == p.shape(), where, ": entry '", key, "' has shape ",
                        shape_str(found[b]->shape()), " but parameter '", pname, "' has shape ", shape_str(p.shape()));
      check<DTypeError>(found[b]->dtype() == p.dtype(), where, ": entry '", key, "' is ", dtype_name(found[b]->dtype()),
                        " but parameter '", pname, "' is ", dtype_name(p.dtype()));
      out[i].buffers.push_back(copy_like(*found[b], p));
    }
  }
  check<ValueError>(entries.empty(), where, ": unexpected entry '", entries.empty() ? "" : entries.begin()->first,
                    "' (no parameter or buffer of this ", name_, " optimizer has that name)");
  return {steps, std::move(out)};
}

}  // namespace qkv::optim
