// One optimizer step, the part both training loops share (epoch_loop.h, lm_loop.h): the
// learning rate set and the gradients zeroed; each micro-batch's loss, already weighted by its
// share of the step's mean, run backward (scaled for fp16); the data-parallel all-reduce
// overlapped with the last micro-batch's backward; the global gradient norm measured and
// clipped (fp16: the gradients unscaled in the same pass); the step's one host read of the loss
// (summed over the ranks) and the norm; and the decision, reported in the run's log: apply,
// skip (a non-finite loss or norm, an fp16 overflow, a norm above skip_above) or stop the run as
// diverged. The loops differ only in what feeds the micro-batches and when they evaluate.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "train/dist/communicator.h"
#include "train/dist/reducer.h"
#include "train/loops/loss_scale.h"
#include "train/loops/nonfinite.h"
#include "train/loops/run_log.h"
#include "train/optim/optimizer.h"

namespace qkv::loops {

struct StepSettings {
  double clip = 0;        // global gradient-norm clip; 0: none (the norm is measured all the same)
  double skip_above = 0;  // do not apply a step whose gradient norm exceeds this; 0: never
  NonfinitePolicy nonfinite;
  Precision precision = Precision::fp32;
  int64_t loss_scale_growth = kLossScaleGrowthInterval;  // fp16: good steps before the scale doubles
  // Data-parallel (null: one process): gradients summed over the ranks in buckets of bucket_mb.
  dist::Communicator* comm = nullptr;
  double bucket_mb = 25;
};

// The settings both loops' options carry under the same names (TrainOptions, LmTrainOptions).
template <class LoopOptions> StepSettings step_settings(const LoopOptions& o) {
  StepSettings s;
  s.clip = o.clip;
  s.nonfinite = o.nonfinite;
  s.precision = o.precision;
  s.comm = o.comm;
  s.bucket_mb = o.bucket_mb;
  return s;
}

struct StepOutcome {
  double loss = 0, norm = 0;              // the step's loss over every rank, its gradient norm
  StepAction action = StepAction::apply;  // the non-finite guard's verdict (skip for an overflow)
  bool overflow = false;                  // fp16: the loss scale overflowed
  bool applied = false;                   // the optimizer stepped
  // Whether the loss is a real one, part of the logged means: applied, or skipped for its norm
  // or an overflow, not for a non-finite loss.
  bool counts_loss() const { return action != StepAction::skip || overflow; }
};

class OptimizerStep {
 public:
  // `params`: the model's parameters in the model's order (the norm sums them in this order).
  // `scale` and `nonfinite_streak` continue a resumed run's.
  OptimizerStep(optim::Optimizer& optimizer, optim::NamedTensors params, const StepSettings& s,
                LossScaleState scale = {}, int64_t nonfinite_streak = 0);

  // Starts step `step` (0-based) at learning rate `lr`.
  void begin(int64_t step, double lr);
  // Before the last micro-batch's backward, so that the all-reduce runs while it does.
  void arm_reduce();
  // Backward of one micro-batch's weighted loss.
  void backward(const Tensor& loss);
  // Ends the step: `loss` is the step's loss on this rank (its micro-batches' sum). Steps the
  // optimizer when the step is applied; a skip or a stop is reported in `log` (`epoch`: the
  // epoch loop's, 0 in the language-model loop) and a stop sets diverged().
  StepOutcome finish(const Tensor& loss, RunLog& log, int64_t epoch);

  const std::optional<Divergence>& diverged() const { return diverged_; }
  const LossScaleState& loss_scale() const { return scaler_.state(); }
  int64_t nonfinite_streak() const { return guard_.streak(); }
  // The data-parallel line of the run's log (rank count, overlap, exposed all-reduce time against
  // `train_seconds`); empty in one process.
  std::string reduce_summary(double train_seconds) const;

 private:
  optim::Optimizer& optimizer_;
  optim::NamedTensors params_;
  StepSettings settings_;
  LossScaler scaler_;
  NonfiniteGuard guard_;
  std::optional<dist::GradReducer> reducer_;
  std::optional<Divergence> diverged_;
  int64_t step_ = 0;
};

}  // namespace qkv::loops
