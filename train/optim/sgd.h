// SGD (train/optim/): torch.optim.SGD with dampening 0, run by the sgd_update op
// (autograd/ops.h). Weight decay is added to the gradient (L2); a parameter group's
// weight_decay overrides the options'. With momentum the buffer starts as the first gradient
// and then follows buf = momentum * buf + g; the step uses buf, or g + momentum * buf with
// nesterov. Buffer (only when momentum != 0): "momentum_buffer".
#pragma once
#include "train/optim/optimizer.h"

namespace qkv::optim {

struct SGDOptions {
  double lr = 1e-2;
  double momentum = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;  // needs momentum > 0
};

class SGD : public Optimizer {
 public:
  explicit SGD(NamedTensors params, SGDOptions options = {});
  explicit SGD(std::vector<ParamGroup> groups, SGDOptions options = {});
  std::vector<autograd::OpId> ops() const override { return {autograd::OpId::sgd_update}; }
  const SGDOptions& options() const { return options_; }

 protected:
  std::vector<std::string> buffer_names() const override;
  void update(const Batch& batch) override;

 private:
  SGDOptions options_;
};

}  // namespace qkv::optim
