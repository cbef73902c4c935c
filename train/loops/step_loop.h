// The training loop every family runs (epoch_loop.h, lm_loop.h): step after step, each one
// optimizer step (optimizer_step.h) over the step's micro-batches at the schedule's learning
// rate (the first step traced by the preflight first), then the progress line, a metrics record
// every log_every steps and at the last, and an evaluation when the run says one is due. A step
// whose gradient norm is above skip_above is not applied and is made again on the next batches
// (it does not use up a step of the schedule). The loop ends when the feed has no more steps,
// after stop_after steps of this call, or diverged: a step the non-finite guard stops, too many
// retries in a row, or an evaluation whose loss is not finite.
//
// What differs between the families is a TrainingRun: what feeds each step's micro-batches and
// their loss, the record a log line writes, and when and how it evaluates (and checkpoints).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "train/loops/metrics.h"
#include "train/loops/nonfinite.h"
#include "train/loops/optimizer_step.h"
#include "train/loops/run_log.h"
#include "train/optim/optimizer.h"
#include "train/optim/schedule.h"

namespace qkv::loops {

struct MicroBatch {
  Tensor inputs, targets;
  double weight = 1;   // this rank's share of the step's mean loss; 0: nothing here, no forward
  int64_t tokens = 0;  // the job's tokens it counts toward tokens/s (0: not counted)
};

// The steps a log line reports: those since the previous line, or since the last evaluation
// ended (its time is not training time).
struct LogWindow {
  int64_t step = 0;      // 1-based: the step the line is logged after
  double loss = 0;       // that step's loss
  double mean_loss = 0;  // over the window's steps whose loss counts (StepOutcome::counts_loss)
  double lr = 0, grad_norm = 0;
  int64_t skipped = 0;  // steps not applied so far in the run
  int64_t tokens = 0;   // the window's tokens
  double seconds = 0;   // the window's training time
  int64_t steps = 0;    // the window's steps
  double steps_per_second() const { return seconds > 0 ? double(steps) / seconds : 0.0; }
  double tokens_per_second() const { return seconds > 0 ? double(tokens) / seconds : 0.0; }
};

// The loop's counters: where a run resumes from (a checkpoint holds them).
struct LoopState {
  int64_t step = 0, skipped = 0, tokens = 0, log_count = 0;
  int64_t nonfinite_streak = 0;  // non-finite steps in a row up to here (nonfinite.h)
  LossScaleState loss_scale;     // an fp16 run's loss scale (loss_scale.h)
  double log_loss_sum = 0;       // the partial sums of the next metrics line
};

class TrainingRun {
 public:
  virtual ~TrainingRun() = default;
  // The micro-batches of step `step` (0-based) into `batches` (cleared first); false: the run
  // has no more steps.
  virtual bool next_step(int64_t step, std::vector<MicroBatch>& batches) = 0;
  // One micro-batch's mean loss, unweighted, under the run's precision.
  virtual Tensor loss(const MicroBatch& batch) = 0;
  // After a step that was applied or skipped (a stopped one is not reported).
  virtual void stepped(const StepOutcome&) {}
  // The metrics record of a log line.
  virtual MetricsRecord log_record(const LogWindow& window) = 0;
  // After step `step` (1-based): whether an evaluation is due, and running it (its records, a
  // checkpoint of the model and `state`). A Divergence stops the run: the evaluation's loss was
  // not finite.
  virtual bool evaluation_due(int64_t step) = 0;
  virtual std::optional<Divergence> evaluate(int64_t step, const LoopState& state) = 0;
  // The epoch the metrics of a non-finite step name (0: the run has no epochs).
  virtual int64_t epoch() const { return 0; }
};

struct LoopSettings {
  StepSettings step;
  int64_t total_steps = 0;  // the run's last step (logged), and the progress line's total
  int64_t log_every = 1;
  int64_t stop_after = 0;  // return after this many steps of this call (0: run to the end)
};

struct LoopResult {
  int64_t steps = 0;                     // steps done by this call (applied or skipped)
  int64_t tokens = 0;                    // of this call's steps
  double seconds = 0, eval_seconds = 0;  // this call's, and the part of it spent evaluating
  std::optional<Divergence> diverged;
  double train_seconds() const { return seconds - eval_seconds; }
};

class StepLoop {
 public:
  // `params`: the model's parameters in the model's order (the gradient norm sums in it);
  // `start`: a resumed run's counters.
  StepLoop(optim::Optimizer& optimizer, optim::NamedTensors params, const optim::LRSchedule& schedule,
           const LoopSettings& settings, RunLog& log, const LoopState& start = {});

  LoopResult run(TrainingRun& run);
  // The counters after the last step; what a checkpoint taken now continues from.
  const LoopState& state() const { return state_; }
  // The data-parallel line of the run's log (optimizer_step.h); empty in one process.
  std::string reduce_summary(double train_seconds) const { return step_.reduce_summary(train_seconds); }

 private:
  // One step's forward and backward over `batches`; this rank's weighted loss, not yet read.
  Tensor forward_backward(TrainingRun& run, const std::vector<MicroBatch>& batches);
  // A step not applied for its gradient norm (StepSettings::skip_above), the `retries`-th in a
  // row: counted as skipped and made again, or (too many in a row) the run stops as diverged.
  bool retry(const StepOutcome& out, int64_t epoch, int64_t retries, LoopResult& result);

  optim::Optimizer& optimizer_;
  const optim::LRSchedule& schedule_;
  LoopSettings settings_;
  RunLog& log_;
  LoopState state_;
  OptimizerStep step_;
  Device device_;
};

}  // namespace qkv::loops
