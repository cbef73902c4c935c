// f16 training's dynamic loss scale (train.precision: fp16). float16 overflows above 65504 and
// loses gradients below about 6e-8, so the loss is multiplied by a power of two before backward
// and the gradients divided by it in the clipping pass (optim/clip.h's unscale), which is exact.
// A step whose gradient norm is not finite while its loss is finite overflowed: it is skipped
// (an overflow is not a divergence: NonfiniteGuard never sees it) and the scale halved. After
// growth_interval overflow-free steps in a row the scale doubles. This is torch.amp.GradScaler's
// policy with its defaults (2^16, x0.5, x2 every 2000 steps). At the floor of 1 an overflow is
// the gradients' own: the NonfiniteGuard judges it like any non-finite step.
#pragma once
#include <cstdint>
#include <string>

#include "train/loops/precision.h"

namespace qkv::loops {

struct LossScaleState {
  double scale = 0;        // 0: no loss scaling (fp32 and bf16 runs)
  int64_t good_steps = 0;  // overflow-free steps since the scale last changed
  bool operator==(const LossScaleState&) const = default;
};

inline constexpr double kInitialLossScale = 65536, kMaxLossScale = 16777216, kMinLossScale = 1;
inline constexpr int64_t kLossScaleGrowthInterval = 2000;

class LossScaler {
 public:
  // Scales only an f16 run; `resumed` (scale > 0) continues a checkpoint's scale.
  explicit LossScaler(Precision precision, LossScaleState resumed = {},
                      int64_t growth_interval = kLossScaleGrowthInterval);
  bool active() const { return state_.scale > 0; }
  double scale() const { return active() ? state_.scale : 1; }  // what the loss is multiplied by
  double unscale() const { return 1 / scale(); }                // what the gradients are multiplied by
  // Called once per step with its loss and unscaled gradient norm (the host read). True when the
  // gradients overflowed: the step must not be applied, and the scale has been halved.
  bool overflowed(double loss, double grad_norm);
  // The line that reports an overflow, after overflowed() returned true.
  std::string overflow_message(int64_t step) const;
  const LossScaleState& state() const { return state_; }

 private:
  LossScaleState state_;
  int64_t growth_interval_;
};

}  // namespace qkv::loops
