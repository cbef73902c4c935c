#include "train/loops/optimizer_step.h"

#include <cmath>

#include "autograd/ops.h"
#include "train/loops/host_values.h"
#include "train/optim/clip.h"

namespace qkv::loops {

OptimizerStep::OptimizerStep(optim::Optimizer& optimizer, optim::NamedTensors params, const StepSettings& s,
                             LossScaleState scale, int64_t nonfinite_streak)
    : optimizer_(optimizer),
      params_(std::move(params)),
      settings_(s),
      scaler_(s.precision, scale, s.loss_scale_growth),
      guard_(s.nonfinite, nonfinite_streak) {
  if (!s.comm) return;
  std::vector<Tensor> tensors;
  for (const auto& [name, p] : params_) tensors.push_back(p);
  reducer_.emplace(*s.comm, std::move(tensors), s.bucket_mb);
}

void OptimizerStep::begin(int64_t step, double lr) {
  step_ = step;
  optimizer_.set_lr(lr);
  optimizer_.zero_grad();
}

void OptimizerStep::arm_reduce() {
  if (reducer_) reducer_->arm(step_);
}

void OptimizerStep::backward(const Tensor& loss) { (scaler_.active() ? loss * scaler_.scale() : loss).backward(); }

StepOutcome OptimizerStep::finish(const Tensor& loss, RunLog& log, int64_t epoch) {
  if (reducer_) reducer_->finish();
  // The norm is measured even without clipping (+inf only measures): a NaN gradient can come
  // with a finite loss. A non-finite norm scales nothing.
  const Tensor norm = optim::clip_grad_norm(params_, settings_.clip > 0 ? settings_.clip : INFINITY, scaler_.unscale());
  // The step's one host read, before the update, so that a non-finite step is not applied.
  std::vector<double> read = read_values({loss, norm});
  const int64_t number = step_ + 1;  // 1-based, as the logs count steps
  if (settings_.comm)
    read[0] = settings_.comm->all_reduce({read[0]}, dist::ReduceOp::sum, cat("the loss at step ", number))[0];
  StepOutcome out;
  out.loss = read[0];
  out.norm = read[1];
  out.overflow = scaler_.overflowed(out.loss, out.norm);
  out.action = out.overflow ? StepAction::skip : guard_.check(out.loss, out.norm);
  if (out.action == StepAction::stop) {
    diverged_ = guard_.stopped(log, number, epoch, out.loss, out.norm);
    return out;
  }
  out.applied = out.action == StepAction::apply && !(settings_.skip_above > 0 && out.norm > settings_.skip_above);
  if (out.applied) optimizer_.step();
  if (out.overflow) log.progress().message(scaler_.overflow_message(number));
  else if (out.action == StepAction::skip) guard_.skipped(log, number, epoch, out.loss, out.norm);
  return out;
}

std::string OptimizerStep::reduce_summary(double train_seconds) const {
  return reducer_ ? reducer_->summary(train_seconds) : std::string();
}

}  // namespace qkv::loops
