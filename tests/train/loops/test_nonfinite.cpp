// A NaN or inf loss or gradient norm in either training loop: the step is not applied and is
// logged; by policy it is skipped (the run goes on) or the run stops as diverged, and too many
// non-finite steps in a row stop it too. A diverged run is not evaluated on the test set, and a
// non-finite validation loss stops a run as well. NaN is forced deterministically: a forward
// that poisons chosen steps' logits, a NaN weight, or a learning rate of 1e30.
#include <doctest/doctest.h>

#include <cmath>
#include <set>

#include "io/safetensors.h"
#include "nn/models/encoder.h"
#include "tests/support/error_checks.h"
#include "tests/support/lm_optimizer.h"
#include "tests/support/test_support.h"
#include "tests/support/token_data.h"
#include "train/data/synthetic.h"
#include "train/loops/epoch_loop.h"
#include "train/loops/lm_loop.h"
#include "train/optim/adam.h"
#include "train/optim/schedule.h"

using namespace qkv;
using namespace qkv::loops;
namespace fs = std::filesystem;

namespace {

// A constant learning rate that tells the test which step (0-based) the loop is at.
struct StepSpy : optim::LRSchedule {
  double lr;
  int64_t* current;
  StepSpy(double lr, int64_t* current) : lr(lr), current(current) {}
  double lr_at(int64_t step) const override {
    *current = step;
    return lr;
  }
};

struct EpochSetup {
  data::SyntheticSplits data = data::make_synthetic_splits(data::SyntheticTask::reverse, 8, 10, 256, 64, 64, 1);
  Generator gen{0};
  nn::Encoder model{nn::EncoderConfig{}, &gen};
  int64_t step = -1;
  std::set<int64_t> poisoned;  // 0-based steps whose training logits are NaN

  // 256 examples in batches of 64, two epochs: 8 steps, unclipped.
  TrainResult fit(const NonfinitePolicy& policy, const fs::path& dir = {}, double lr = 1e-3) {
    optim::AdamOptions ao;
    optim::Adam opt(model.named_parameters(), ao);
    StepSpy schedule(lr, &step);
    TrainOptions o;
    o.epochs = 2;
    o.batch_size = 64;
    o.log_every = 1000;
    o.nonfinite = policy;
    o.dir = dir;
    auto forward = [&](const Tensor& ids) {
      const Tensor logits = model.forward(ids);
      return model.is_training() && poisoned.count(step) ? logits * NAN : logits;
    };
    return loops::fit(model, forward, opt, schedule, {data.train.inputs, data.train.targets},
                      {data.val.inputs, data.val.targets}, {data.test.inputs, data.test.targets}, o);
  }
};

bool all_finite(const nn::Module& m) {
  for (const auto& [name, t] : m.state_dict())
    for (float x : t.to_vector<float>())
      if (!std::isfinite(x)) return false;
  return true;
}

std::vector<NonfiniteRecord> nonfinite_records(const fs::path& dir) {
  return records_of<NonfiniteRecord>(read_metrics(dir / "metrics.jsonl"));
}

}  // namespace

TEST_CASE("non-finite guard: skips up to the limit in a row, a finite step ends the streak, stop stops at once") {
  NonfiniteGuard skip({OnNonfinite::skip, 2});
  CHECK(skip.check(1.0, 2.0) == StepAction::apply);
  CHECK(skip.check(NAN, 2.0) == StepAction::skip);
  CHECK(skip.check(1.0, INFINITY) == StepAction::skip);
  CHECK(skip.streak() == 2);
  CHECK(skip.check(1.0, 2.0) == StepAction::apply);  // the streak ends
  CHECK(skip.streak() == 0);
  CHECK(skip.check(-INFINITY, NAN) == StepAction::skip);
  CHECK(skip.check(NAN, NAN) == StepAction::skip);
  CHECK(skip.check(NAN, 1.0) == StepAction::stop);  // the third in a row
  test::check_contains(skip.stop_reason(NAN, 1.0), {"loss nan", "gradient norm 1", "3 non-finite steps in a row",
                                                    "train.max_consecutive_skips = 2"});
  const NonfiniteRecord r = skip.record(7, 2, NAN, 1.0, StepAction::stop);
  CHECK(r.step == 7);
  CHECK(r.epoch == 2);
  CHECK(r.action == "stop");
  CHECK(r.consecutive == 3);

  NonfiniteGuard stop({OnNonfinite::stop, 10});
  CHECK(stop.check(1.0, 1.0) == StepAction::apply);
  CHECK(stop.check(1.0, NAN) == StepAction::stop);
  test::check_contains(stop.stop_reason(1.0, NAN), {"gradient norm nan", "train.on_nonfinite: stop"});
  NonfiniteGuard none({OnNonfinite::skip, 0});  // no skips allowed
  CHECK(none.check(NAN, NAN) == StepAction::stop);
  CHECK(NonfiniteGuard({OnNonfinite::skip, 0}, 4).streak() == 4);  // a resumed streak
}

TEST_CASE("metrics records: a nonfinite record round-trips, NaN written as null") {
  const NonfiniteRecord r{12, 3, NAN, INFINITY, "skip", 2};
  const nlohmann::json j = to_json(r);
  CHECK(j.dump() ==
        R"({"action":"skip","consecutive":2,"epoch":3,"grad_norm":null,"loss":null,"record":"nonfinite","step":12})");
  const auto back = std::get<NonfiniteRecord>(metrics_record_from_json(nlohmann::json::parse(j.dump()), "m"));
  CHECK(back.step == 12);
  CHECK(back.epoch == 3);
  CHECK(std::isnan(back.loss));
  CHECK(std::isnan(back.grad_norm));  // null reads back as NaN, not an error
  CHECK(back.action == "skip");
  const auto lm = std::get<NonfiniteRecord>(
      metrics_record_from_json(to_json(NonfiniteRecord{5, std::nullopt, 2.0, NAN, "stop", 1}), "m"));
  CHECK_FALSE(lm.epoch.has_value());
  nlohmann::json bad = j;
  bad["action"] = "retry";
  CHECK_THROWS_WITH_AS(metrics_record_from_json(bad, "m.jsonl:4"),
                       doctest::Contains("m.jsonl:4: field 'action' is 'retry', expected skip or stop"), IOError);
}

TEST_CASE("epoch training: a non-finite step is skipped, logged, and training goes on") {
  test::TempDir dir;
  EpochSetup s;
  s.poisoned = {1, 2, 4, 5};  // two streaks of two: each within the limit
  const uint64_t syncs_before = host_sync_count();
  const TrainResult r = s.fit({OnNonfinite::skip, 2}, dir.path);
  const uint64_t syncs = host_sync_count() - syncs_before;
  CHECK_FALSE(r.diverged.has_value());
  CHECK(r.steps == 8);
  CHECK(r.skipped_steps == 4);
  CHECK(std::isfinite(r.test_accuracy));
  CHECK(all_finite(s.model));
  // Unclipped, the loss and the gradient norm are still read once per step, before the update.
  CHECK(syncs == uint64_t(r.steps) + 2 + 1);  // + a validation per epoch + the test
  const auto records = nonfinite_records(dir.path);
  REQUIRE(records.size() == 4);
  CHECK(records[0].step == 2);  // 1-based, as the step lines count
  CHECK(records[0].epoch == 1);
  CHECK(records[1].consecutive == 2);
  CHECK(records[3].step == 6);
  CHECK(records[3].epoch == 2);
  for (const auto& n : records) {
    CHECK(n.action == "skip");
    CHECK(std::isnan(n.loss));
  }
  CHECK(records_of<TestRecord>(read_metrics(dir.path / "metrics.jsonl")).size() == 1);
  CHECK(test::read_file(dir.path / "train.log").find("step 2: skipped, loss nan") != std::string::npos);
}

TEST_CASE("epoch training: a skipped step changes no weight") {
  EpochSetup s;
  std::map<std::string, std::vector<float>> before;
  for (const auto& [name, t] : s.model.state_dict()) before[name] = t.to_vector<float>();
  s.poisoned = {0, 1, 2, 3, 4, 5, 6, 7};
  const TrainResult r = s.fit({OnNonfinite::skip, 100});
  CHECK(r.skipped_steps == 8);
  CHECK_FALSE(r.diverged.has_value());
  for (const auto& [name, t] : s.model.state_dict()) CHECK(t.to_vector<float>() == before.at(name));
}

TEST_CASE("epoch training: more non-finite steps in a row than the limit stop the run as diverged") {
  test::TempDir dir;
  EpochSetup s;
  s.poisoned = {2, 3, 4, 5, 6, 7};
  const TrainResult r = s.fit({OnNonfinite::skip, 2}, dir.path);
  REQUIRE(r.diverged.has_value());
  CHECK(r.diverged->step == 5);  // steps 3 and 4 skipped, the third in a row stops
  CHECK(r.diverged->epoch == 2);
  test::check_contains(r.diverged->reason, {"loss nan", "3 non-finite steps in a row", "max_consecutive_skips = 2"});
  CHECK(r.steps == 4);
  CHECK(r.skipped_steps == 2);
  CHECK(std::isnan(r.test_accuracy));  // never evaluated
  CHECK(std::isnan(r.test_loss));
  CHECK(r.epochs.size() == 1);
  const auto all = read_metrics(dir.path / "metrics.jsonl");
  CHECK(records_of<TestRecord>(all).empty());
  const auto records = records_of<NonfiniteRecord>(all);
  REQUIRE(records.size() == 3);
  CHECK(records.back().step == 5);
  CHECK(records.back().action == "stop");
  CHECK(records.back().consecutive == 3);
}

TEST_CASE("epoch training: on_nonfinite stop stops at the first non-finite step") {
  EpochSetup s;
  s.poisoned = {2};
  const TrainResult r = s.fit({OnNonfinite::stop, 10});
  REQUIRE(r.diverged.has_value());
  CHECK(r.diverged->step == 3);
  CHECK(r.diverged->epoch == 1);
  CHECK(r.skipped_steps == 0);
  CHECK(r.epochs.empty());
  CHECK(r.best_val_accuracy == 0);  // no validation happened
  CHECK(std::isnan(r.test_accuracy));
}

TEST_CASE("epoch training: a learning rate of 1e30 ends diverged, never with a test accuracy") {
  EpochSetup s;
  const TrainResult r = s.fit({OnNonfinite::skip, 2}, {}, 1e30);
  REQUIRE(r.diverged.has_value());
  CHECK_FALSE(r.diverged->reason.empty());
  CHECK(std::isnan(r.test_accuracy));
}

namespace {

constexpr int64_t kVocab = 64;

struct LmSetup {
  test::TempDir root{"lm-nonfinite"};
  fs::path tokens = test::markov_token_dataset(root.path, kVocab);
  Generator gen{3};
  nn::GPT model{[] {
                  nn::GPTConfig c;
                  c.vocab = kVocab;
                  c.context = 16;
                  c.layers = 2;
                  c.attention.d_model = 16;
                  c.attention.heads = 2;
                  return c;
                }(),
                &gen};

  LmTrainResult train(const NonfinitePolicy& policy, double lr = 3e-3, int64_t eval_every = 12,
                      const optim::LRSchedule* schedule_override = nullptr) {
    data::TokenBatchOptions tb;
    tb.batch = 4;
    tb.context = 16;
    tb.seed = 11;
    data::TokenBatches train(tokens, "train", tb);
    tb.shuffle = false;
    data::TokenBatches val(tokens, "val", tb);
    optim::ConstantLR schedule(lr);
    LmTrainOptions o;
    o.steps = 12;
    o.eval_every = eval_every;
    o.eval_batches = 2;
    o.log_every = 1;
    o.nonfinite = policy;
    o.dir = root.path / "run";
    return train_lm(model, gen, *test::lm_adamw(model), train, val,
                    schedule_override ? *schedule_override : static_cast<const optim::LRSchedule&>(schedule), o);
  }
  std::vector<NonfiniteRecord> records() const { return nonfinite_records(root.path / "run"); }
};

}  // namespace

TEST_CASE("lm training: a NaN weight makes every step non-finite: skipped up to the limit, then diverged") {
  LmSetup s;
  s.model.wte.weight.data<float>()[5] = NAN;
  const LmTrainResult r = s.train({OnNonfinite::skip, 3});
  REQUIRE(r.diverged.has_value());
  CHECK(r.diverged->step == 4);
  CHECK(r.diverged->epoch == 0);
  test::check_contains(r.diverged->reason, {"loss nan", "4 non-finite steps in a row", "max_consecutive_skips = 3"});
  CHECK_FALSE(r.finished);
  CHECK(r.steps == 3);
  CHECK(r.skipped_steps == 3);
  CHECK(std::isnan(r.final_val_loss));
  CHECK(r.evals.empty());
  CHECK_FALSE(latest_checkpoint(s.root.path / "run").has_value());
  const auto records = s.records();
  REQUIRE(records.size() == 4);
  CHECK(records[0].step == 1);
  CHECK_FALSE(records[0].epoch.has_value());
  CHECK(records[2].action == "skip");
  CHECK(records[3].action == "stop");
  // The step lines' mean loss leaves the non-finite steps out: none was finite, so it is NaN.
  const auto lines = records_of<LmStepRecord>(read_metrics(s.root.path / "run" / "metrics.jsonl"));
  REQUIRE(lines.size() == 3);
  CHECK(lines.back().skipped == 3);
  CHECK(std::isnan(lines.back().loss));
}

// A constant learning rate whose schedule, asked for the rate of steps `from` .. `to` (0-based),
// puts a NaN into one weight and takes it out again for every other step: a transient fault
// (a bad batch, a flipped bit) that the loop must ride out.
struct TransientNan : optim::LRSchedule {
  TransientNan(Tensor w, int64_t first, int64_t last) : weight(std::move(w)), from(first), to(last) {}
  Tensor weight;
  int64_t from, to;
  mutable float saved = 0;
  mutable bool poisoned = false;
  double lr_at(int64_t step) const override {
    float& w = weight.data<float>()[7];
    const bool want = step >= from && step <= to;
    if (want && !poisoned) saved = w, w = NAN;
    if (!want && poisoned) w = saved;
    poisoned = want;
    return 3e-3;
  }
};

TEST_CASE("lm training: a transient NaN is skipped, the streak ends, and training recovers") {
  LmSetup s;
  const TransientNan nan_steps(s.model.wte.weight, 2, 3);  // steps 3 and 4
  const LmTrainResult r = s.train({OnNonfinite::skip, 3}, 3e-3, 6, &nan_steps);
  CHECK_FALSE(r.diverged.has_value());
  CHECK(r.finished);
  CHECK(r.steps == 12);
  CHECK(r.skipped_steps == 2);
  REQUIRE(r.evals.size() == 2);
  CHECK(std::isfinite(r.evals[0].val_loss));
  CHECK(std::isfinite(r.final_val_loss));
  CHECK(r.final_val_loss < r.evals[0].val_loss);  // training went on learning after the fault
  CHECK(std::isfinite(s.model.wte.weight.data<float>()[7]));
  const auto records = s.records();
  REQUIRE(records.size() == 2);
  CHECK(records[0].step == 3);
  CHECK(records[0].action == "skip");
  CHECK(records[0].consecutive == 1);
  CHECK(records[1].step == 4);
  CHECK(records[1].consecutive == 2);
  CHECK(latest_checkpoint(s.root.path / "run").has_value());
  CHECK(load_latest_lm_checkpoint(s.root.path / "run", kCPU)->state.nonfinite_streak == 0);
}

TEST_CASE("lm training: on_nonfinite stop stops at the first non-finite step") {
  LmSetup s;
  s.model.wte.weight.data<float>()[0] = INFINITY;
  const LmTrainResult r = s.train({OnNonfinite::stop, 10});
  REQUIRE(r.diverged.has_value());
  CHECK(r.diverged->step == 1);
  CHECK(r.steps == 0);
  CHECK(r.skipped_steps == 0);
  test::check_contains(r.diverged->reason, {"train.on_nonfinite: stop"});
  REQUIRE(s.records().size() == 1);
  CHECK(s.records()[0].action == "stop");
}

TEST_CASE("lm training: a non-finite validation loss stops the run without a checkpoint") {
  LmSetup s;
  // The first update at 1e30 leaves weights that overflow the next forward passes; their steps
  // are skipped (the limit is not reached) and the validation at step 4 is not finite.
  const LmTrainResult r = s.train({OnNonfinite::skip, 100}, 1e30, 4);
  REQUIRE(r.diverged.has_value());
  CHECK(r.diverged->step == 4);
  test::check_contains(r.diverged->reason, {"non-finite validation loss", "at step 4"});
  CHECK(r.skipped_steps == 3);
  REQUIRE(r.evals.size() == 1);
  CHECK_FALSE(std::isfinite(r.evals[0].val_loss));
  CHECK_FALSE(latest_checkpoint(s.root.path / "run").has_value());
}

TEST_CASE("lm checkpoints keep the count of non-finite steps in a row and an older one reads as none") {
  test::TempDir dir;
  Generator gen(0);
  nn::GPT model(
      [] {
        nn::GPTConfig c;
        c.vocab = 16;
        c.context = 4;
        c.layers = 1;
        c.attention.d_model = 8;
        c.attention.heads = 2;
        return c;
      }(),
      &gen);
  LmLoopState s;
  s.step = 8;
  s.nonfinite_streak = 3;
  save_lm_checkpoint(model, {}, s, dir.path, 2);
  REQUIRE(load_latest_lm_checkpoint(dir.path, kCPU).has_value());
  CHECK(load_latest_lm_checkpoint(dir.path, kCPU)->state.nonfinite_streak == 3);

  // The same state file without the key, as written before it existed.
  const fs::path state = dir.path / "checkpoints" / "step_00000008.state.safetensors";
  safetensors::Metadata meta;
  auto tensors = safetensors::load(state.string(), kCPU, &meta);
  meta.erase("nonfinite_streak");
  safetensors::save(state.string(), std::vector<std::pair<std::string, Tensor>>(tensors.begin(), tensors.end()), meta);
  CHECK(load_latest_lm_checkpoint(dir.path, kCPU)->state.nonfinite_streak == 0);
}
