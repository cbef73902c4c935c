// Adam / AdamW: option checks and the adam_update op call of a batch; the arithmetic is the
// op's (kernels/cpu/optim.cpp).
#include "train/optim/adam.h"

#include <cmath>

#include "autograd/ops.h"

namespace qkv::optim {
namespace {

void check_options(const std::string& name, const AdamOptions& o) {
  check<ValueError>(o.beta1 >= 0 && o.beta1 < 1, name, ": beta1 must be in [0, 1), got ", o.beta1);
  check<ValueError>(o.beta2 >= 0 && o.beta2 < 1, name, ": beta2 must be in [0, 1), got ", o.beta2);
  check<ValueError>(std::isfinite(o.eps) && o.eps >= 0, name, ": eps must be finite and >= 0, got ", o.eps);
}

}  // namespace

Adam::Adam(NamedTensors params, AdamOptions options) : Adam({ParamGroup{std::move(params), {}}}, options) {}
Adam::Adam(std::vector<ParamGroup> groups, AdamOptions options) : Adam("Adam", std::move(groups), options, false) {}

Adam::Adam(std::string name, std::vector<ParamGroup> groups, AdamOptions options, bool decoupled_decay)
    : Optimizer(name, std::move(groups), options.lr, options.weight_decay),
      options_(options),
      decoupled_decay_(decoupled_decay) {
  check_options(name, options);
}

std::vector<std::string> Adam::buffer_names() const { return {"exp_avg", "exp_avg_sq"}; }

void Adam::update(const Batch& batch) {
  std::vector<Tensor> groups;
  groups.reserve(4 * batch.params.size());
  for (size_t i = 0; i < batch.params.size(); ++i)
    groups.insert(groups.end(), {batch.params[i], batch.grads[i], batch.buffers[i][0], batch.buffers[i][1]});
  const AdamOptions& o = options_;
  adam_update_(groups, AdamAttrs{lr(), o.beta1, o.beta2, o.eps, batch.weight_decay, batch.step, decoupled_decay_});
}

AdamW::AdamW(NamedTensors params, AdamOptions options) : AdamW({ParamGroup{std::move(params), {}}}, options) {}
AdamW::AdamW(std::vector<ParamGroup> groups, AdamOptions options) : Adam("AdamW", std::move(groups), options, true) {}

}  // namespace qkv::optim
