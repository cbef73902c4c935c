#include "train/loops/preflight_step.h"

#include "autograd/preflight.h"

namespace qkv::loops {

void preflight_step(optim::Optimizer& opt, bool clips, const std::function<void()>& forward_backward) {
  if (opt.params().empty()) return;
  const Device device = opt.params().front().second.device();
  const std::vector<autograd::OpCall> calls = autograd::trace_ops(forward_backward);
  opt.zero_grad();  // the trace's gradients hold garbage
  std::vector<autograd::OpId> ops = opt.ops();
  if (clips) ops.push_back(autograd::OpId::clip_grad_norm);
  autograd::require_kernels(calls, ops, device, cat("train.device ", device));
}

}  // namespace qkv::loops
