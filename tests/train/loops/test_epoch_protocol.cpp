// The epoch loop's protocols (train/loops/epoch_loop.h): validation evals_per_epoch times per
// epoch after evenly spaced batches, the best of all validations tested; or test_last (all_last):
// no validation set touched, every training example trained on each epoch, the weights after the
// last epoch checkpointed and tested.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "nn/models/encoder.h"
#include "tests/support/error_checks.h"
#include "tests/support/test_support.h"
#include "train/data/synthetic.h"
#include "train/loops/epoch_loop.h"
#include "train/optim/adam.h"
#include "train/optim/schedule.h"

using namespace qkv;
using namespace qkv::loops;

namespace {

// Another source's batches, counting the examples served per epoch; `active` while an epoch is
// being read.
class CountingBatches : public data::BatchSource {
 public:
  explicit CountingBatches(data::BatchSource& inner) : inner_(inner) {}
  int64_t batches_per_epoch() const override { return inner_.batches_per_epoch(); }
  int64_t examples() const override { return inner_.examples(); }
  void start_epoch(int64_t epoch) override {
    served.push_back(0);
    active = true;
    inner_.start_epoch(epoch);
  }
  bool next(Tensor& inputs, Tensor& targets) override {
    active = inner_.next(inputs, targets);
    if (active) served.back() += inputs.size(0);
    return active;
  }
  std::vector<int64_t> served;  // per start_epoch call
  bool active = false;

 private:
  data::BatchSource& inner_;
};

// Copy (learnt in a few steps) with 256 training examples.
struct Setup {
  data::SyntheticSplits data = data::make_synthetic_splits(data::SyntheticTask::copy, 8, 10, 256, 64, 64, 3);
  Generator gen{0};
  nn::Encoder model{nn::EncoderConfig{}, &gen};

  TrainResult fit(const TrainOptions& o, data::BatchSource& train, data::BatchSource& val, data::BatchSource& test,
                  const Forward& forward) {
    optim::AdamOptions ao;
    ao.lr = 1e-2;
    optim::Adam opt(model.named_parameters(), ao);
    optim::ConstantLR schedule(ao.lr);
    return loops::fit(model, forward, opt, schedule, train, val, test, o);
  }
  Forward plain() {
    return [this](const Tensor& ids) { return model.forward(ids); };
  }
};

TrainOptions options(const std::filesystem::path& dir) {
  TrainOptions o;
  o.epochs = 2;
  o.batch_size = 32;
  o.eval_batch_size = 64;
  o.log_every = 1000;
  o.dir = dir;
  return o;
}

}  // namespace

TEST_CASE("epoch protocol: all_last trains on every training example and tests the weights after the last epoch") {
  test::TempDir dir;
  Setup s;
  data::TensorBatches train_batches({s.data.train.inputs, s.data.train.targets}, 64, true, 7);
  data::TensorBatches no_val(data::LabelledData{}, 64, false);
  data::TensorBatches test_batches({s.data.test.inputs, s.data.test.targets}, 64, false);
  CountingBatches train(train_batches), val(no_val);
  TrainOptions o = options(dir.path);
  o.epochs = 3;
  o.test_last = true;
  const TrainResult r = s.fit(o, train, val, test_batches, s.plain());
  REQUIRE_FALSE(r.diverged.has_value());
  CHECK(train.served == std::vector<int64_t>{256, 256, 256});  // every example, every epoch
  CHECK(val.served.empty());                                   // never validated
  CHECK(r.steps == 12);
  CHECK(r.best_epoch == 3);
  CHECK(r.tested_epoch == 3.0);
  CHECK(std::isnan(r.best_val_accuracy));
  CHECK(r.validations.empty());
  REQUIRE(r.epochs.size() == 3);
  for (const EpochRecord& e : r.epochs) {
    CHECK((std::isfinite(e.train_loss) && std::isnan(e.val_accuracy)));
    // Without validation the test split monitors each epoch; it chooses no weights.
    REQUIRE(e.test_accuracy.has_value());
    CHECK((*e.test_accuracy >= 0 && *e.test_accuracy <= 1 && std::isfinite(*e.test_loss)));
  }
  CHECK(*r.epochs.back().test_accuracy == r.test_accuracy);
  CHECK(*r.epochs.back().test_loss == r.test_loss);
  const auto logged = records_of<EpochRecord>(read_metrics(dir.path / "metrics.jsonl"));
  REQUIRE(logged.size() == 3);
  for (size_t i = 0; i < 3; ++i) CHECK(logged[i].test_accuracy == r.epochs[i].test_accuracy);
  // The model keeps the last weights, and they are the ones tested and checkpointed.
  const EvalResult now = evaluate(s.model, s.plain(), test_batches);
  CHECK(now.accuracy == r.test_accuracy);
  s.model.load((dir.path / "checkpoint.safetensors").string());
  CHECK(evaluate(s.model, s.plain(), test_batches).accuracy == r.test_accuracy);
  const auto records = read_metrics(dir.path / "metrics.jsonl");
  CHECK(records_of<ValRecord>(records).empty());
  REQUIRE(records_of<TestRecord>(records).size() == 1);
  CHECK(records_of<TestRecord>(records)[0].best_epoch == 3);
  CHECK(records_of<TestRecord>(records)[0].test_accuracy == r.test_accuracy);
}

TEST_CASE("epoch protocol: evals_per_epoch 4 validates 4 times per epoch and tests the best of all") {
  test::TempDir dir;
  Setup s;
  // Validation and test read the same examples, so the tested weights' test accuracy is their
  // validation accuracy. Every validation but the third is made worthless (constant logits), so
  // the best one is a quarter before the end of epoch 1.
  data::TensorBatches train_batches({s.data.train.inputs, s.data.train.targets}, 32, true, 7);
  data::TensorBatches val_batches({s.data.test.inputs, s.data.test.targets}, 64, false);
  data::TensorBatches test_batches({s.data.test.inputs, s.data.test.targets}, 64, false);
  CountingBatches val(val_batches);
  const Forward forward = [&](const Tensor& ids) {
    const Tensor logits = s.model.forward(ids);
    return !s.model.is_training() && val.active && val.served.size() != 3 ? logits * 0.0 : logits;
  };
  TrainOptions o = options(dir.path);
  o.evals_per_epoch = 4;
  const TrainResult r = s.fit(o, train_batches, val, test_batches, forward);
  REQUIRE_FALSE(r.diverged.has_value());
  REQUIRE(r.validations.size() == 8);  // 8 batches per epoch, 2 epochs: after batches 2, 4, 6, 8
  for (size_t k = 0; k < 8; ++k) {
    CAPTURE(k);
    CHECK(r.validations[k].epoch == doctest::Approx(0.25 * double(k + 1)));
    CHECK(r.validations[k].step == int64_t(2 * (k + 1)));
  }
  const auto best =
      std::max_element(r.validations.begin(), r.validations.end(),
                       [](const ValRecord& a, const ValRecord& b) { return a.val_accuracy < b.val_accuracy; });
  CHECK(best - r.validations.begin() == 2);
  CHECK(r.best_val_accuracy == best->val_accuracy);
  CHECK(r.tested_epoch == 0.75);
  CHECK(r.best_epoch == 1);
  CHECK(r.test_accuracy == r.best_val_accuracy);  // the third validation's weights were tested
  // The epoch records carry the validation that ends each epoch; metrics.jsonl has all eight.
  REQUIRE(r.epochs.size() == 2);
  CHECK(r.epochs[0].val_accuracy == r.validations[3].val_accuracy);
  CHECK(r.epochs[1].val_accuracy == r.validations[7].val_accuracy);
  const auto records = read_metrics(dir.path / "metrics.jsonl");
  CHECK(records_of<ValRecord>(records) == r.validations);
  CHECK(records_of<TestRecord>(records)[0].best_epoch == 1);
}

TEST_CASE("epoch protocol: more validations per epoch than training batches are refused") {
  Setup s;
  data::TensorBatches train({s.data.train.inputs, s.data.train.targets}, 128, true, 7);  // 2 batches
  data::TensorBatches val({s.data.val.inputs, s.data.val.targets}, 64, false);
  TrainOptions o = options({});
  o.evals_per_epoch = 3;
  const std::string message = test::error_of<ValueError>([&] { s.fit(o, train, val, val, s.plain()); });
  test::check_contains(message, {"train.evals_per_epoch is 3", "2 training batches"});
}
