// fp16 training's dynamic loss scale (train/loops/loss_scale.h): GradScaler's policy as a state
// machine, then in the epoch loop, where a forward whose logit gradients overflow float16 at the
// initial scale has its first steps skipped and its scale halved until they fit, without a
// divergence even when any non-finite step would stop the run.
#include <doctest/doctest.h>

#include <cmath>

#include "nn/models/encoder.h"
#include "tests/support/error_checks.h"
#include "tests/support/test_support.h"
#include "train/data/synthetic.h"
#include "train/loops/epoch_loop.h"
#include "train/loops/loss_scale.h"
#include "train/optim/adam.h"
#include "train/optim/schedule.h"

using namespace qkv;
using namespace qkv::loops;

TEST_CASE("loss scale: only fp16 scales, an overflow halves it, good steps double it, within 1 to 2^24") {
  for (Precision p : {Precision::fp32, Precision::bf16}) {
    LossScaler off(p);
    CHECK_FALSE(off.active());
    CHECK(off.scale() == 1);
    CHECK_FALSE(off.overflowed(1.0, INFINITY));  // the NonfiniteGuard's to judge
  }
  LossScaler s(Precision::f16, {}, 3);
  CHECK(s.scale() == kInitialLossScale);
  CHECK(s.unscale() == 1.0 / 65536);
  CHECK(s.overflowed(2.0, INFINITY));
  CHECK(s.scale() == 32768);
  test::check_contains(s.overflow_message(5), {"step 5", "overflowed at loss scale 65536", "scale now 32768"});
  CHECK(s.overflowed(2.0, NAN));
  CHECK(s.scale() == 16384);
  CHECK_FALSE(s.overflowed(NAN, INFINITY));  // the forward overflowed: not a gradient overflow
  CHECK(s.scale() == 16384);
  CHECK_FALSE(s.overflowed(2.0, 1.0));
  CHECK_FALSE(s.overflowed(2.0, 1.0));
  CHECK(s.state() == LossScaleState{16384, 2});
  CHECK_FALSE(s.overflowed(2.0, 1.0));  // the third good step in a row
  CHECK(s.state() == LossScaleState{32768, 0});
  CHECK(s.overflowed(2.0, INFINITY));  // an overflow restarts the count
  CHECK(s.state() == LossScaleState{16384, 0});

  LossScaler top(Precision::f16, {kMaxLossScale, 2}, 3);  // a resumed state
  CHECK_FALSE(top.overflowed(1.0, 1.0));
  CHECK(top.state() == LossScaleState{kMaxLossScale, 0});  // capped
  LossScaler floor(Precision::f16, {2, 0});
  CHECK(floor.overflowed(1.0, INFINITY));
  CHECK(floor.scale() == 1);
  CHECK_FALSE(floor.overflowed(1.0, INFINITY));  // at 1 the gradients themselves are not finite
  CHECK(floor.scale() == 1);

  CHECK_THROWS_WITH_AS(LossScaler(Precision::f16, {3, 0}), doctest::Contains("3 is not a power of two"), ValueError);
  CHECK_THROWS_WITH_AS(LossScaler(Precision::f16, {}, 0), doctest::Contains("growth interval"), ValueError);
}

TEST_CASE("epoch training in fp16: gradient overflows are skipped and halve the scale, and the run trains on") {
  data::SyntheticSplits data = data::make_synthetic_splits(data::SyntheticTask::reverse, 8, 10, 256, 64, 64, 1);
  Generator gen(0);
  nn::Encoder model(nn::EncoderConfig{}, &gen);
  optim::Adam opt(model.named_parameters(), optim::AdamOptions{});
  optim::ConstantLR schedule(1e-3);
  TrainOptions o;
  o.epochs = 2;
  o.batch_size = 64;
  o.log_every = 1000;
  o.precision = Precision::f16;
  o.nonfinite = {OnNonfinite::stop, 0};  // any non-finite step the guard sees stops the run
  // Logits times 5: at the initial scale of 2^16 some float16 gradients pass 65504 (without the
  // factor none do); a few halvings bring them into range (2 of the 8 steps, as this runs).
  auto forward = [&](const Tensor& ids) { return model.forward(ids) * 5.0; };
  const TrainResult r = fit(model, forward, opt, schedule, {data.train.inputs, data.train.targets},
                            {data.val.inputs, data.val.targets}, {data.test.inputs, data.test.targets}, o);
  CHECK_FALSE(r.diverged.has_value());
  CHECK(r.steps == 8);
  CHECK(r.skipped_steps >= 1);
  CHECK(r.skipped_steps <= 4);  // the scale came down to where the steps apply
  CHECK(std::isfinite(r.test_loss));
  for (const auto& [name, t] : model.state_dict())
    for (float x : t.to_vector<float>()) REQUIRE_MESSAGE(std::isfinite(x), name);
}
