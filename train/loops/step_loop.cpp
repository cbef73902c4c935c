#include "train/loops/step_loop.h"

#include <chrono>

#include "autograd/ops.h"
#include "io/fault_hook.h"
#include "train/loops/host_values.h"
#include "train/loops/preflight_step.h"

namespace qkv::loops {

using Clock = std::chrono::steady_clock;

namespace {
Device device_of(const optim::NamedTensors& params) {
  check<ValueError>(!params.empty(), "training: the model has no parameters");
  return params.front().second.device();
}
double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}
}  // namespace

StepLoop::StepLoop(optim::Optimizer& optimizer, optim::NamedTensors params, const optim::LRSchedule& schedule,
                   const LoopSettings& settings, RunLog& log, const LoopState& start)
    : optimizer_(optimizer),
      schedule_(schedule),
      settings_(settings),
      log_(log),
      state_(start),
      step_(optimizer, params, settings.step, start.loss_scale, start.nonfinite_streak),
      device_(device_of(params)) {}

Tensor StepLoop::forward_backward(TrainingRun& run, const std::vector<MicroBatch>& batches) {
  std::vector<Tensor> losses;
  for (size_t i = 0; i < batches.size(); ++i) {
    if (i + 1 == batches.size()) step_.arm_reduce();  // the last micro-batch's backward all-reduces
    const MicroBatch& b = batches[i];
    if (b.weight == 0) continue;
    Tensor loss = run.loss(b);
    if (b.weight != 1) loss = loss * b.weight;
    step_.backward(loss);
    losses.push_back(loss);
  }
  // One micro-batch (the epoch loop's every step) is its own loss: no summing ops on the step.
  if (losses.size() == 1) return losses.front();
  DeviceSum loss_sum(device_);
  for (const Tensor& loss : losses) loss_sum.add(loss);
  return loss_sum.tensor();
}

// The official language-model loop's rule: the step is not applied and is made again on the
// next batches, at the same learning rate, so the run still makes all its updates; a run whose
// steps keep failing stops as diverged after as many as the non-finite guard allows in a row.
bool StepLoop::retry(const StepOutcome& out, int64_t epoch, int64_t retries, LoopResult& result) {
  const int64_t number = state_.step + 1;
  const int64_t allowed = settings_.step.nonfinite.max_consecutive_skips;
  if (retries > allowed) {
    result.diverged = Divergence{number, epoch,
                                 cat(retries, " attempts in a row at step ", number, " had a gradient norm above ",
                                     settings_.step.skip_above, " (train.skip_grad_norm; at most ", allowed,
                                     " retries in a row: train.max_consecutive_skips)")};
    log_.progress().message(cat("step ", number, ": run stopped as diverged: ", result.diverged->reason));
    return false;
  }
  ++state_.skipped;
  log_.progress().message(cat("step ", number, ": gradient norm ", out.norm, " above ", settings_.step.skip_above,
                              ": not applied, made again on the next batches"));
  return true;
}

LoopResult StepLoop::run(TrainingRun& run) {
  LoopResult result;
  Progress& progress = log_.progress();
  const auto start = Clock::now();
  ThroughputWindow window(start);
  std::vector<MicroBatch> batches;
  bool traced = false;
  int64_t retries = 0;                // steps in a row not applied for a gradient norm above skip_above
  fault_point("start", state_.step);  // testing hook (io/fault_hook.h), as is the one below
  while (settings_.stop_after == 0 || result.steps < settings_.stop_after) {
    const double lr = schedule_.lr_at(state_.step);
    batches.clear();
    if (!run.next_step(state_.step, batches)) break;
    if (!traced && !batches.empty() && batches.front().inputs.size(0) > 0) {
      preflight_step(optimizer_, true, [&] { run.loss(batches.front()).backward(); });
      traced = true;
    }
    step_.begin(state_.step, lr);
    const Tensor loss = forward_backward(run, batches);
    int64_t tokens = 0;
    for (const MicroBatch& b : batches) tokens += b.tokens;
    window.add(tokens);
    result.tokens += tokens;
    const StepOutcome out = step_.finish(loss, log_, run.epoch());
    state_.loss_scale = step_.loss_scale();
    state_.nonfinite_streak = step_.nonfinite_streak();
    if (out.action == StepAction::stop) {
      result.diverged = step_.diverged();
      break;
    }
    if (!out.applied && out.action == StepAction::apply) {  // a finite norm above skip_above
      if (!retry(out, run.epoch(), ++retries, result)) break;
      continue;
    }
    retries = 0;
    const int64_t step = ++state_.step;
    ++result.steps;
    state_.skipped += !out.applied;
    state_.tokens += tokens;
    if (out.counts_loss()) {  // a non-finite step's loss stays out of the logged mean
      state_.log_loss_sum += out.loss;
      ++state_.log_count;
    }
    run.stepped(out);
    if (step % settings_.log_every == 0 || step == settings_.total_steps) {
      const ThroughputWindow::Rate rate = window.take(Clock::now());
      const LogWindow w{step,        out.loss,     state_.log_loss_sum / double(state_.log_count),
                        lr,          out.norm,     state_.skipped,
                        rate.tokens, rate.seconds, rate.steps};
      log_.record(run.log_record(w));
      state_.log_loss_sum = 0;
      state_.log_count = 0;
    }
    progress.update(step, out.loss, lr);
    fault_point("train", step);
    if (run.evaluation_due(step)) {
      const auto eval_start = Clock::now();
      result.diverged = run.evaluate(step, state_);
      const auto eval_end = Clock::now();
      result.eval_seconds += seconds_between(eval_start, eval_end);
      if (result.diverged) {
        progress.message(cat("step ", step, ": run stopped as diverged: ", result.diverged->reason));
        break;
      }
      window.restart(eval_end);  // the rates count training time only
    }
  }
  result.seconds = seconds_between(start, Clock::now());
  return result;
}

}  // namespace qkv::loops
