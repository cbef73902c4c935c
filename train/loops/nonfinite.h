// What the training loops do when a step's loss or gradient norm is not finite (NaN or inf):
// the step is not applied, and by policy the run either skips it and goes on or stops as
// diverged. Skipping is bounded: a run whose non-finite steps come max_consecutive_skips + 1 in
// a row stops as diverged too, rather than spinning through the rest of its steps unchanged.
// Each such step is logged (a "nonfinite" record of metrics.h) with the step and the action.
#pragma once
#include <cstdint>
#include <string>

#include "train/loops/metrics.h"
#include "train/loops/run_log.h"

namespace qkv::loops {

enum class OnNonfinite { skip, stop };

struct NonfinitePolicy {
  OnNonfinite on = OnNonfinite::skip;
  int64_t max_consecutive_skips = 10;  // 0: the first non-finite step stops the run
};

// Why and where a run stopped: the optimizer step (1-based) that was not applied, its epoch
// (epoch loop; 0 for the language-model loop) and a sentence for people.
struct Divergence {
  int64_t step = 0, epoch = 0;
  std::string reason;
  bool operator==(const Divergence&) const = default;
};

enum class StepAction { apply, skip, stop };

class NonfiniteGuard {
 public:
  // `streak`: non-finite steps in a row before this one (a resumed run continues its count).
  explicit NonfiniteGuard(const NonfinitePolicy& policy, int64_t streak = 0);
  // The action for a step whose loss and gradient norm were read: apply when both are finite
  // (which ends a streak), else skip or stop.
  StepAction check(double loss, double grad_norm);
  int64_t streak() const { return streak_; }
  // The record of a step check() did not apply, and why a stopped run stopped.
  NonfiniteRecord record(int64_t step, int64_t epoch, double loss, double grad_norm, StepAction action) const;
  std::string stop_reason(double loss, double grad_norm) const;
  // Both loops' reports of such a step (`epoch` 0 in the language-model loop): its record in
  // metrics.jsonl and a console line; stopped() also returns the run's Divergence.
  void skipped(RunLog& log, int64_t step, int64_t epoch, double loss, double grad_norm) const;
  Divergence stopped(RunLog& log, int64_t step, int64_t epoch, double loss, double grad_norm) const;

 private:
  NonfinitePolicy policy_;
  int64_t streak_ = 0;
};

// "nan", "inf", "-inf" or the number, for messages.
std::string describe_value(double x);

}  // namespace qkv::loops
