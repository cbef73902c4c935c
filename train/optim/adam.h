// Adam and AdamW (train/optim/): the update of torch.optim.Adam / torch.optim.AdamW on the
// single-tensor, non-fused, non-amsgrad path, run by the adam_update op (autograd/ops.h). Adam
// adds weight decay to the gradient (L2); AdamW decays the parameter directly
// (p *= 1 - lr * weight_decay) before the Adam update. A parameter group's weight_decay
// overrides the options'. Buffers: "exp_avg" (first moment) and "exp_avg_sq" (second moment).
#pragma once
#include "train/optim/optimizer.h"

namespace qkv::optim {

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;  // note: PyTorch's AdamW defaults to 1e-2
};

class Adam : public Optimizer {
 public:
  explicit Adam(NamedTensors params, AdamOptions options = {});
  explicit Adam(std::vector<ParamGroup> groups, AdamOptions options = {});
  std::vector<autograd::OpId> ops() const override { return {autograd::OpId::adam_update}; }
  const AdamOptions& options() const { return options_; }

 protected:
  Adam(std::string name, std::vector<ParamGroup> groups, AdamOptions options, bool decoupled_decay);
  std::vector<std::string> buffer_names() const override;
  void update(const Batch& batch) override;

 private:
  AdamOptions options_;
  bool decoupled_decay_ = false;  // AdamW
};

class AdamW : public Adam {
 public:
  explicit AdamW(NamedTensors params, AdamOptions options = {});
  explicit AdamW(std::vector<ParamGroup> groups, AdamOptions options = {});
};

}  // namespace qkv::optim
