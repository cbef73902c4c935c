#include "train/loops/nonfinite.h"

#include <cmath>
#include <cstdio>

#include "tensor/error.h"

namespace qkv::loops {

std::string describe_value(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", x);
  return buf;
}

NonfiniteGuard::NonfiniteGuard(const NonfinitePolicy& policy, int64_t streak) : policy_(policy), streak_(streak) {
  qkv::check<ValueError>(policy.max_consecutive_skips >= 0, "max_consecutive_skips must be >= 0, got ",
                         policy.max_consecutive_skips);
}

StepAction NonfiniteGuard::check(double loss, double grad_norm) {
  if (std::isfinite(loss) && std::isfinite(grad_norm)) {
    streak_ = 0;
    return StepAction::apply;
  }
  ++streak_;
  if (policy_.on == OnNonfinite::stop || streak_ > policy_.max_consecutive_skips) return StepAction::stop;
  return StepAction::skip;
}

NonfiniteRecord NonfiniteGuard::record(int64_t step, int64_t epoch, double loss, double grad_norm,
                                       StepAction action) const {
  return {step,
          epoch > 0 ? std::optional<int64_t>(epoch) : std::nullopt,
          loss,
          grad_norm,
          action == StepAction::stop ? "stop" : "skip",
          streak_};
}

std::string NonfiniteGuard::stop_reason(double loss, double grad_norm) const {
  const std::string values = cat("loss ", describe_value(loss), ", gradient norm ", describe_value(grad_norm));
  if (policy_.on == OnNonfinite::stop) return cat("non-finite ", values, " (train.on_nonfinite: stop)");
  return cat("non-finite ", values, "; ", streak_, " non-finite step", streak_ == 1 ? "" : "s",
             " in a row, more than train.max_consecutive_skips = ", policy_.max_consecutive_skips);
}

void NonfiniteGuard::skipped(RunLog& log, int64_t step, int64_t epoch, double loss, double grad_norm) const {
  log.record(record(step, epoch, loss, grad_norm, StepAction::skip));
  log.progress().message(cat("step ", step, ": skipped, loss ", describe_value(loss), ", gradient norm ",
                             describe_value(grad_norm), " (", streak_, " non-finite in a row)"));
}

Divergence NonfiniteGuard::stopped(RunLog& log, int64_t step, int64_t epoch, double loss, double grad_norm) const {
  log.record(record(step, epoch, loss, grad_norm, StepAction::stop));
  Divergence d{step, epoch, stop_reason(loss, grad_norm)};
  log.progress().message(cat("step ", step, ": run stopped as diverged: ", d.reason));
  return d;
}

}  // namespace qkv::loops
