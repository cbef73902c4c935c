// SGD: option checks and the sgd_update op call of a batch; the arithmetic is the op's
// (kernels/cpu/optim.cpp).
#include "train/optim/sgd.h"

#include <cmath>

#include "autograd/ops.h"

namespace qkv::optim {
namespace {

void check_options(const SGDOptions& o) {
  check<ValueError>(std::isfinite(o.momentum) && o.momentum >= 0, "SGD: momentum must be finite and >= 0, got ",
                    o.momentum);
  check<ValueError>(!o.nesterov || o.momentum > 0, "SGD: nesterov needs momentum > 0");
}

}  // namespace

SGD::SGD(NamedTensors params, SGDOptions options) : SGD({ParamGroup{std::move(params), {}}}, options) {}

SGD::SGD(std::vector<ParamGroup> groups, SGDOptions options)
    : Optimizer("SGD", std::move(groups), options.lr, options.weight_decay), options_(options) {
  check_options(options);
}

std::vector<std::string> SGD::buffer_names() const {
  if (options_.momentum == 0) return {};
  return {"momentum_buffer"};
}

void SGD::update(const Batch& batch) {
  std::vector<Tensor> groups;
  groups.reserve(3 * batch.params.size());
  for (size_t i = 0; i < batch.params.size(); ++i) {
    const Tensor buffer = batch.buffers[i].empty() ? Tensor() : batch.buffers[i][0];  // none without momentum
    groups.insert(groups.end(), {batch.params[i], batch.grads[i], buffer});
  }
  const SGDOptions& o = options_;
  sgd_update_(groups, SgdAttrs{lr(), o.momentum, batch.weight_decay, o.nesterov, /*first=*/batch.step == 1});
}

}  // namespace qkv::optim
