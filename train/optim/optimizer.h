// The base class of the training optimizers (train/optim/): a list of named parameters, the
// learning rate, the step count, and per-parameter state (an update count and the optimizer's
// buffers, e.g. Adam's moments), with state_dict() / load_state_dict() to save and resume it.
// Also is_fusable_cpu(), the test the optimizers and clip_grad_norm use to pick their fused
// raw-pointer loop over the generic path built from qkv ops.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace qkv::optim {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// True when every tensor is a contiguous CPU float32/float64 tensor with the dtype and element
// count of the first: then one flat loop over raw pointers can update them all.
bool is_fusable_cpu(std::initializer_list<Tensor> tensors);

class Optimizer {
 public:
  // `params` are leaf float32/float64 tensors that require grad, with unique non-empty names.
  // `name` ("Adam", "SGD", ...) prefixes error messages.
  Optimizer(std::string name, NamedTensors params, double lr);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One update of every parameter whose grad is defined (others are skipped, as in PyTorch),
  // under NoGradGuard, in place. Buffers are created on a parameter's first update.
  virtual void step();
  void zero_grad();                             // drops every parameter's .grad

  double lr() const { return lr_; }
  void set_lr(double lr);                       // lr >= 0 and finite
  int64_t steps() const { return steps_; }      // calls to step() so far
  const NamedTensors& params() const { return params_; }

  // A snapshot (copies, not views) of the optimizer state: "step" (0-dim int64, steps()), and
  // for each parameter that has been updated, "step.<param>" (its own update count, which
  // drives bias correction) and "<buffer>.<param>" for each buffer_names() entry.
  NamedTensors state_dict() const;
  // Restores a state_dict() exactly. Every entry is checked before anything changes: a missing,
  // unexpected or mis-shaped entry throws ValueError naming it. Buffers are copied onto each
  // parameter's device and dtype.
  void load_state_dict(const NamedTensors& state);

 protected:
  struct ParamState {
    int64_t step = 0;                           // updates this parameter has received
    std::vector<Tensor> buffers;                // one per buffer_names() entry, same order
  };

  // Names of the per-parameter buffers ("exp_avg", ...); may be empty.
  virtual std::vector<std::string> buffer_names() const = 0;
  // Updates `param` in place from `grad`. state.step already counts this update; buffers are
  // contiguous, zero-filled on the first update, on the parameter's device and dtype.
  virtual void update(Tensor& param, const Tensor& grad, ParamState& state) = 0;

  const std::string& name() const { return name_; }

 private:
  std::vector<ParamState> restore_states(const NamedTensors& state) const;

  std::string name_;
  NamedTensors params_;
  std::vector<ParamState> states_;
  double lr_ = 0;
  int64_t steps_ = 0;
};

}  // namespace qkv::optim
