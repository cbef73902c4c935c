// Learning-rate schedules (train/optim/): a function from the step index (0-based) to the
// learning rate, applied by the training loop with optimizer.set_lr(schedule.lr_at(step)).
// ConstantLR, CosineWarmup (nanoGPT's linear warmup then cosine decay) and MultiStepLR
// (torch.optim.lr_scheduler.MultiStepLR). Constructors throw ValueError on bad arguments.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

namespace qkv::optim {

class LRSchedule {
 public:
  virtual ~LRSchedule() = default;
  virtual double lr_at(int64_t step) const = 0;  // step >= 0, else ValueError
};

class ConstantLR : public LRSchedule {
 public:
  explicit ConstantLR(double lr);
  double lr_at(int64_t step) const override;

 private:
  double lr_;
};

// step < warmup_steps: base_lr * (step + 1) / warmup_steps; then cosine from base_lr at
// step == warmup_steps to min_lr at step == total_steps; min_lr after that.
// Needs 0 <= min_lr <= base_lr and 0 <= warmup_steps < total_steps.
class CosineWarmup : public LRSchedule {
 public:
  CosineWarmup(double base_lr, int64_t warmup_steps, int64_t total_steps, double min_lr = 0.0);
  double lr_at(int64_t step) const override;

 private:
  double base_lr_, min_lr_;
  int64_t warmup_steps_, total_steps_;
};

// base_lr * gamma^k, k = the number of milestones <= step. Milestones: increasing, >= 0.
class MultiStepLR : public LRSchedule {
 public:
  MultiStepLR(double base_lr, std::vector<int64_t> milestones, double gamma = 0.1);
  double lr_at(int64_t step) const override;

 private:
  double base_lr_, gamma_;
  std::vector<int64_t> milestones_;
};

// A schedule as the experiment files describe one; make_schedule is the one place schedules are
// built from settings, for every training loop.
enum class ScheduleKind { constant, cosine, multistep };
struct ScheduleSpec {
  ScheduleKind kind = ScheduleKind::cosine;
  double base_lr = 1e-3;
  int64_t total_steps = 0;
  double warmup_fraction = 0;       // of total_steps
  int64_t warmup_steps = 0;         // overrides warmup_fraction when > 0
  double min_lr = 0;                // cosine
  std::vector<int64_t> milestones;  // multistep, in steps
  double gamma = 0.1;               // multistep
};
// ValueError (from the schedule's constructor) for settings that do not fit, e.g. a warmup as
// long as the run.
std::unique_ptr<LRSchedule> make_schedule(const ScheduleSpec& spec);

}  // namespace qkv::optim
