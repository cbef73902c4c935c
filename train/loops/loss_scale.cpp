#include "train/loops/loss_scale.h"

#include <cmath>

#include "tensor/error.h"

namespace qkv::loops {

LossScaler::LossScaler(Precision precision, LossScaleState resumed, int64_t growth_interval)
    : growth_interval_(growth_interval) {
  check<ValueError>(growth_interval > 0, "loss scale: the growth interval must be positive, got ", growth_interval);
  if (precision != Precision::f16) return;
  state_ = resumed.scale > 0 ? resumed : LossScaleState{kInitialLossScale, 0};
  const double s = state_.scale;
  check<ValueError>(s >= kMinLossScale && s <= kMaxLossScale && std::exp2(std::ilogb(s)) == s, "loss scale: ", s,
                    " is not a power of two from 1 to 2^24");
}

bool LossScaler::overflowed(double loss, double grad_norm) {
  if (!active()) return false;
  if (std::isfinite(grad_norm)) {
    if (++state_.good_steps >= growth_interval_) {
      state_.scale = std::min(state_.scale * 2, kMaxLossScale);
      state_.good_steps = 0;
    }
    return false;
  }
  if (!std::isfinite(loss) || state_.scale <= kMinLossScale) return false;  // the NonfiniteGuard's
  state_.scale /= 2;
  state_.good_steps = 0;
  return true;
}

std::string LossScaler::overflow_message(int64_t step) const {
  return cat("step ", step, ": fp16 gradients overflowed at loss scale ", state_.scale * 2,
             ": step skipped, scale now ", state_.scale);
}

}  // namespace qkv::loops
