// The trainers' preflight (autograd/preflight.h): before the first update, one training step's
// forward and backward run with no kernel launched, and a model that needs an op-table row
// with no kernel on its device is refused with every such row named.
#pragma once
#include <functional>

#include "train/optim/optimizer.h"

namespace qkv::loops {

// Traces `forward_backward` (the step's forward, loss and backward, on its real batch) for the
// device `opt`'s parameters are on, with the optimizer's ops and, when `clips`, clip_grad_norm;
// throws DeviceError naming the missing rows. The gradients the trace left are dropped.
void preflight_step(optim::Optimizer& opt, bool clips, const std::function<void()>& forward_backward);

}  // namespace qkv::loops
