// The base class of the training optimizers (train/optim/): parameter groups, the learning
// rate, the step count, per-parameter state (an update count and the optimizer's buffers, e.g.
// Adam's moments) with state_dict() / load_state_dict() to save and resume it, and the step
// loop, which batches the parameters for the update ops (autograd/ops.h: adam_update_, ...).
// The arithmetic lives in those ops; this file is bookkeeping.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "autograd/op_table.h"
#include "tensor/tensor.h"

namespace qkv::optim {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// Parameters that share settings; weight_decay, when set, overrides the optimizer's.
struct ParamGroup {
  NamedTensors params;
  std::optional<double> weight_decay;
};

// Which parameters weight decay applies to.
// - matrices: GPT practice (nanoGPT, minGPT): tensors with at least 2 dims (matrices, embeddings)
//   decay with `weight_decay`, the others (biases, LayerNorm weights and biases) get 0.
// - all: every parameter decays, as a plain torch.optim.AdamW(model.parameters()) does (the
//   study's official language-model code).
enum class DecayRule { matrices, all };
const char* decay_rule_name(DecayRule r);  // "matrices" / "all"

// The groups of `rule`: the decayed group, then the other one; an empty group is left out.
// Order within a group is the order of `params`.
std::vector<ParamGroup> weight_decay_groups(const NamedTensors& params, double weight_decay,
                                            DecayRule rule = DecayRule::matrices);

class Optimizer {
 public:
  // `groups` hold leaf float32/float64 tensors that require grad, with non-empty names unique
  // across all groups, at least one in all; a group may be empty. `name` ("Adam", "SGD", ...)
  // prefixes error messages; `weight_decay` is the optimizer's, which groups may override.
  Optimizer(std::string name, std::vector<ParamGroup> groups, double lr, double weight_decay);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One update of every parameter whose grad is defined (others are skipped, as in PyTorch),
  // under NoGradGuard, in place. Buffers are created on a parameter's first update. Within a
  // group, the parameters with the same update count go to update() together: one op call.
  virtual void step();
  void zero_grad();  // drops every parameter's .grad

  // The op-table rows step() calls (its update op), for the trainers' preflight.
  virtual std::vector<autograd::OpId> ops() const = 0;

  double lr() const { return lr_; }
  void set_lr(double lr);                                 // lr >= 0 and finite
  int64_t steps() const { return steps_; }                // calls to step() so far
  const NamedTensors& params() const { return params_; }  // every group's, in order

  // A snapshot (copies, not views) of the optimizer state: "step" (0-dim int64, steps()), and
  // for each parameter that has been updated, "step.<param>" (its own update count, which
  // drives bias correction) and "<buffer>.<param>" for each buffer_names() entry. Groups do not
  // show: the names are the parameters'.
  NamedTensors state_dict() const;
  // Restores a state_dict() exactly. Every entry is checked before anything changes: a missing,
  // unexpected or mis-shaped entry throws ValueError naming it. Buffers are copied onto each
  // parameter's device and dtype.
  void load_state_dict(const NamedTensors& state);

 protected:
  // Parameters of one group with the same update count, updated together.
  struct Batch {
    std::vector<Tensor> params;                // contiguous (a non-contiguous one is staged)
    std::vector<Tensor> grads;                 // may be strided views
    std::vector<std::vector<Tensor>> buffers;  // buffers[i]: params[i]'s, in buffer_names() order
    int64_t step = 0;                          // every parameter's update count, this one included
    double weight_decay = 0;                   // the group's override, else the optimizer's
  };

  // Names of the per-parameter buffers ("exp_avg", ...); may be empty.
  virtual std::vector<std::string> buffer_names() const = 0;
  // Updates a batch in place, with one op call. Buffers are contiguous, zero-filled on the
  // first update, on the parameter's device and dtype.
  virtual void update(const Batch& batch) = 0;

  const std::string& name() const { return name_; }

 private:
  struct ParamState {
    int64_t step = 0;             // updates this parameter has received
    std::vector<Tensor> buffers;  // one per buffer_names() entry, same order
  };
  struct GroupRange {
    size_t begin, end;  // into params_
    double weight_decay;
  };

  void step_group(const GroupRange& group, const std::vector<std::string>& buffers);
  struct Restored {
    int64_t steps;                   // the "step" entry
    std::vector<ParamState> states;  // one per parameter
  };
  Restored restore(const NamedTensors& state) const;

  std::string name_;
  NamedTensors params_;
  std::vector<GroupRange> groups_;
  std::vector<ParamState> states_;
  double lr_ = 0;
  int64_t steps_ = 0;
};

}  // namespace qkv::optim
