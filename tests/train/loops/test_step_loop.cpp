// The training loop both families run (train/loops/step_loop.h), driven by a scripted run: one
// weight pulled toward each micro-batch's values by SGD, so every step's loss and update can be
// worked out by hand. What the loop owns is checked here: log lines every log_every steps and at
// the last with the window since the previous line or evaluation, evaluations when due,
// weighted and empty micro-batches, non-finite steps, stop_after and resuming from the counters.
#include <doctest/doctest.h>

#include <cmath>
#include <set>

#include "autograd/ops.h"
#include "train/loops/step_loop.h"
#include "train/optim/schedule.h"
#include "train/optim/sgd.h"

using namespace qkv;
using namespace qkv::loops;

namespace {

constexpr double kLr = 0.25;

// Step s feeds two micro-batches, of values s and s + 1 (weights 1/4 and 3/4, 5 tokens each);
// the loss of a micro-batch is mean((w - values)^2).
struct ScriptedRun final : TrainingRun {
  Tensor w;
  int64_t steps = 5;                      // the feed's length
  int64_t eval_every = 0;                 // 0: never
  std::set<int64_t> nan_steps;            // 0-based steps whose loss is NaN
  std::optional<int64_t> diverging_eval;  // the step whose evaluation reports a divergence
  bool empty_first = false;               // the first micro-batch has weight 0 (another rank's rows)
  std::set<int64_t> steep_calls;          // next_step calls (0-based) whose loss is scaled by 1e6
  std::vector<LogWindow> logged;
  std::vector<double> losses;  // of the steps reported to stepped()
  std::vector<int64_t> evaluated;
  std::vector<LoopState> eval_states;
  int loss_calls = 0;
  int64_t feeding = 0, calls = 0;
  bool steep = false;

  explicit ScriptedRun(Tensor weight) : w(std::move(weight)) {}

  bool next_step(int64_t step, std::vector<MicroBatch>& batches) override {
    if (step >= steps) return false;
    feeding = step;
    steep = steep_calls.count(calls++) > 0;
    const double v = double(step);
    batches.push_back({full({2}, v), Tensor(), empty_first ? 0.0 : 0.25, 5});
    batches.push_back({full({2}, v + 1), Tensor(), 0.75, 5});
    return true;
  }
  Tensor loss(const MicroBatch& b) override {
    ++loss_calls;
    const Tensor d = w - b.inputs;
    const Tensor l = mean(d * d);
    if (nan_steps.count(feeding)) return l * NAN;
    return steep ? l * 1e6 : l;
  }
  void stepped(const StepOutcome& out) override { losses.push_back(out.loss); }
  MetricsRecord log_record(const LogWindow& window) override {
    logged.push_back(window);
    return EvalRecord{window.step, window.mean_loss, 0};
  }
  bool evaluation_due(int64_t step) override { return eval_every > 0 && step % eval_every == 0; }
  std::optional<Divergence> evaluate(int64_t step, const LoopState& state) override {
    evaluated.push_back(step);
    eval_states.push_back(state);
    if (diverging_eval && *diverging_eval == step) return Divergence{step, 0, "scripted"};
    return std::nullopt;
  }
};

struct Fixture {
  Tensor w = zeros({1}).set_requires_grad();
  optim::SGD sgd{optim::NamedTensors{{"w", w}}, {kLr}};
  optim::ConstantLR schedule{kLr};
  RunLog log{{{}, "step-loop", 5, 2, std::nullopt}};
  ScriptedRun run{w};

  LoopResult train(LoopSettings settings, const LoopState& start = {}) {
    StepLoop loop(sgd, {{"w", w}}, schedule, settings, log, start);
    LoopResult r = loop.run(run);
    state = loop.state();
    return r;
  }
  double weight() const { return w.item<float>(); }
  LoopState state;
};

LoopSettings settings(int64_t log_every, int64_t total = 5, int64_t stop_after = 0, OnNonfinite on = OnNonfinite::skip,
                      double skip_above = 0) {
  LoopSettings s;
  s.step.nonfinite = {on, 2};
  s.step.skip_above = skip_above;
  s.total_steps = total;
  s.log_every = log_every;
  s.stop_after = stop_after;
  return s;
}

// The weight after SGD steps 0..steps-1 from w: the step's gradient is
// 2 * (0.25 * (w - s) + 0.75 * (w - s - 1)).
double expected_weight(int64_t steps, double w = 0) {
  for (int64_t s = 0; s < steps; ++s) w -= kLr * 2 * (0.25 * (w - double(s)) + 0.75 * (w - double(s) - 1));
  return w;
}

}  // namespace

TEST_CASE("step loop: every step is the weighted micro-batches' update, logged every log_every steps and at the last") {
  Fixture f;
  const LoopResult r = f.train(settings(2));
  CHECK_FALSE(r.diverged);
  CHECK(r.steps == 5);
  CHECK(r.tokens == 5 * 10);
  CHECK(f.state.step == 5);
  CHECK(f.weight() == doctest::Approx(expected_weight(5)).epsilon(1e-6));
  REQUIRE(f.run.logged.size() == 3);  // after steps 2, 4 and 5 (the last)
  CHECK(f.run.logged[0].step == 2);
  CHECK(f.run.logged[1].step == 4);
  CHECK(f.run.logged[2].step == 5);
  CHECK(f.run.logged[2].steps == 1);
  CHECK(f.run.logged[2].tokens == 10);
  REQUIRE(f.run.losses.size() == 5);
  CHECK(f.run.logged[0].mean_loss == doctest::Approx((f.run.losses[0] + f.run.losses[1]) / 2));
  CHECK(f.run.logged[1].mean_loss == doctest::Approx((f.run.losses[2] + f.run.losses[3]) / 2));
  CHECK(f.run.logged[1].loss == f.run.losses[3]);
  CHECK(f.run.logged[1].lr == kLr);
  // Step 0 from w = 0: 0.25 * mean((0 - 0)^2) + 0.75 * mean((0 - 1)^2).
  CHECK(f.run.losses[0] == doctest::Approx(0.75));
}

TEST_CASE("step loop: a micro-batch of weight 0 runs no forward, and the preflight traces the first one") {
  Fixture f;
  f.run.empty_first = true;
  f.run.steps = 2;
  f.train(settings(1, 2));
  // Step 0: the preflight and the weighted batch; step 1: the weighted batch.
  CHECK(f.run.loss_calls == 3);
  CHECK(f.run.losses[0] == doctest::Approx(0.75));  // 0.75 * mean((0 - 1)^2): the other rank's share absent
}

TEST_CASE("step loop: evaluations run when due, hold the counters, and restart the logged window") {
  Fixture f;
  f.run.eval_every = 3;
  f.train(settings(2));
  CHECK(f.run.evaluated == std::vector<int64_t>{3});
  REQUIRE(f.run.eval_states.size() == 1);
  CHECK(f.run.eval_states[0].step == 3);
  CHECK(f.run.eval_states[0].log_count == 1);  // step 3, logged with step 4
  REQUIRE(f.run.logged.size() == 3);
  CHECK(f.run.logged[1].step == 4);
  CHECK(f.run.logged[1].steps == 1);  // the evaluation after step 3 restarted the rate's window
  CHECK(f.run.logged[1].mean_loss == doctest::Approx((f.run.losses[2] + f.run.losses[3]) / 2));  // the mean did not
}

TEST_CASE("step loop: an evaluation's divergence stops the run after that step") {
  Fixture f;
  f.run.eval_every = 2;
  f.run.diverging_eval = 2;
  const LoopResult r = f.train(settings(1));
  REQUIRE(r.diverged);
  CHECK(r.diverged->reason == "scripted");
  CHECK(r.steps == 2);
  CHECK(f.state.step == 2);
  CHECK(f.run.evaluated == std::vector<int64_t>{2});
  CHECK(r.eval_seconds >= 0);
  CHECK(r.eval_seconds <= r.seconds);
}

TEST_CASE("step loop: a non-finite step is skipped and kept out of the logged mean, or stops the run") {
  Fixture skip;
  skip.run.nan_steps = {1};
  const LoopResult r = skip.train(settings(5));
  CHECK_FALSE(r.diverged);
  CHECK(skip.state.step == 5);
  CHECK(skip.state.skipped == 1);
  REQUIRE(skip.run.logged.size() == 1);
  CHECK(skip.run.logged[0].skipped == 1);
  CHECK(std::isnan(skip.run.losses[1]));
  CHECK(skip.run.logged[0].mean_loss ==
        doctest::Approx((skip.run.losses[0] + skip.run.losses[2] + skip.run.losses[3] + skip.run.losses[4]) / 4));

  Fixture stop;
  stop.run.nan_steps = {1};
  const LoopResult s = stop.train(settings(5, 5, 0, OnNonfinite::stop));
  REQUIRE(s.diverged);
  CHECK(s.diverged->step == 2);  // 1-based
  CHECK(stop.state.step == 1);   // the stopped step is not counted
  CHECK(stop.weight() == doctest::Approx(expected_weight(1)).epsilon(1e-6));
}

TEST_CASE("step loop: stop_after returns early, and a loop started from its counters continues the same run") {
  Fixture whole;
  whole.train(settings(4));

  Fixture split;
  const LoopResult first = split.train(settings(4, 5, 3));
  CHECK(first.steps == 3);
  CHECK(split.state.step == 3);
  CHECK(split.run.logged.empty());
  const LoopResult rest = split.train(settings(4), split.state);
  CHECK(rest.steps == 2);
  CHECK(split.state.step == 5);
  CHECK(split.weight() == whole.weight());
  REQUIRE(split.run.logged.size() == 2);
  REQUIRE(whole.run.logged.size() == 2);
  // The line after step 4 averages steps 1 to 4 across the split, as the uninterrupted run's does.
  CHECK(split.run.logged[0].step == 4);
  CHECK(split.run.logged[0].mean_loss == whole.run.logged[0].mean_loss);
  CHECK(split.run.logged[1].mean_loss == whole.run.logged[1].mean_loss);
}

TEST_CASE("step loop: a step whose gradient norm is above skip_above is made again on the next batches") {
  Fixture f;
  f.run.steep_calls = {1, 2};  // step 1's first two attempts
  const LoopResult r = f.train(settings(5, 5, 0, OnNonfinite::skip, 1e3));
  CHECK_FALSE(r.diverged);
  CHECK(r.steps == 5);  // every update made
  CHECK(f.state.skipped == 2);
  CHECK(f.run.calls == 7);                                                 // 5 steps and 2 retries
  CHECK(f.weight() == doctest::Approx(expected_weight(5)).epsilon(1e-6));  // the steep attempts changed nothing
  REQUIRE(f.run.logged.size() == 1);
  CHECK(f.run.logged[0].skipped == 2);
  CHECK(f.run.logged[0].steps == 7);  // the rate's window counts the attempts' time

  // More retries in a row than the policy allows (2) stop the run as diverged at that step.
  Fixture stuck;
  stuck.run.steep_calls = {1, 2, 3};
  const LoopResult s = stuck.train(settings(5, 5, 0, OnNonfinite::skip, 1e3));
  REQUIRE(s.diverged);
  CHECK(s.diverged->step == 2);
  CHECK(s.diverged->reason.find("3 attempts in a row at step 2") != std::string::npos);
  CHECK(stuck.state.step == 1);
}
