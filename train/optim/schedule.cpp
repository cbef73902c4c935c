// The learning-rate schedules: argument checks and the lr_at formulas.
#include "train/optim/schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "tensor/error.h"

namespace qkv::optim {
namespace {

void check_lr(const char* schedule, const char* what, double lr) {
  check<ValueError>(std::isfinite(lr) && lr >= 0, schedule, ": ", what, " must be finite and >= 0, got ", lr);
}

void check_step(const char* schedule, int64_t step) {
  check<ValueError>(step >= 0, schedule, ": lr_at() needs a step >= 0, got ", step);
}

}  // namespace

ConstantLR::ConstantLR(double lr) : lr_(lr) { check_lr("ConstantLR", "lr", lr); }

double ConstantLR::lr_at(int64_t step) const {
  check_step("ConstantLR", step);
  return lr_;
}

CosineWarmup::CosineWarmup(double base_lr, int64_t warmup_steps, int64_t total_steps, double min_lr)
    : base_lr_(base_lr), min_lr_(min_lr), warmup_steps_(warmup_steps), total_steps_(total_steps) {
  check_lr("CosineWarmup", "base_lr", base_lr);
  check_lr("CosineWarmup", "min_lr", min_lr);
  check<ValueError>(min_lr <= base_lr, "CosineWarmup: min_lr (", min_lr, ") must not exceed base_lr (", base_lr, ")");
  check<ValueError>(warmup_steps >= 0, "CosineWarmup: warmup_steps must be >= 0, got ", warmup_steps);
  check<ValueError>(total_steps > warmup_steps, "CosineWarmup: total_steps (", total_steps,
                    ") must be greater than warmup_steps (", warmup_steps, ")");
}

double CosineWarmup::lr_at(int64_t step) const {
  check_step("CosineWarmup", step);
  if (step < warmup_steps_) return base_lr_ * double(step + 1) / double(warmup_steps_);
  if (step > total_steps_) return min_lr_;
  const double progress = double(step - warmup_steps_) / double(total_steps_ - warmup_steps_);
  const double coeff = 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
  return min_lr_ + coeff * (base_lr_ - min_lr_);
}

MultiStepLR::MultiStepLR(double base_lr, std::vector<int64_t> milestones, double gamma)
    : base_lr_(base_lr), gamma_(gamma), milestones_(std::move(milestones)) {
  check_lr("MultiStepLR", "base_lr", base_lr);
  check<ValueError>(std::isfinite(gamma) && gamma > 0, "MultiStepLR: gamma must be finite and > 0, got ", gamma);
  for (size_t i = 0; i < milestones_.size(); ++i) {
    check<ValueError>(milestones_[i] >= 0, "MultiStepLR: milestone ", milestones_[i], " is negative");
    if (i > 0)
      check<ValueError>(milestones_[i] > milestones_[i - 1],
                        "MultiStepLR: milestones must be strictly increasing, "
                        "got ",
                        milestones_[i - 1], " then ", milestones_[i]);
  }
}

double MultiStepLR::lr_at(int64_t step) const {
  check_step("MultiStepLR", step);
  const auto passed = std::upper_bound(milestones_.begin(), milestones_.end(), step) - milestones_.begin();
  return base_lr_ * std::pow(gamma_, double(passed));
}

std::unique_ptr<LRSchedule> make_schedule(const ScheduleSpec& s) {
  switch (s.kind) {
    case ScheduleKind::constant: return std::make_unique<ConstantLR>(s.base_lr);
    case ScheduleKind::multistep: return std::make_unique<MultiStepLR>(s.base_lr, s.milestones, s.gamma);
    case ScheduleKind::cosine: {
      const int64_t warmup = s.warmup_steps > 0 ? s.warmup_steps : int64_t(s.warmup_fraction * double(s.total_steps));
      return std::make_unique<CosineWarmup>(s.base_lr, warmup, s.total_steps, s.min_lr);
    }
  }
  throw ValueError("unknown schedule kind");
}

}  // namespace qkv::optim
