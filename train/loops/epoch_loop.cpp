#include "train/loops/epoch_loop.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>

#include "autograd/autocast.h"
#include "io/safetensors.h"
#include "train/dist/consistency.h"
#include "train/loops/host_values.h"
#include "train/loops/run_log.h"
#include "train/loops/step_loop.h"

namespace qkv::loops {

using data::BatchSource;
using data::LabelledData;
using data::TensorBatches;
using optim::LRSchedule;
using optim::Optimizer;

namespace {

// The mean cross-entropy of logits [..., C] flattened against targets [...].
Tensor batch_loss(const Tensor& logits, const Tensor& targets) {
  const int64_t C = logits.size(-1);
  return cross_entropy(logits.reshape({-1, C}), targets.reshape({-1}));
}

// Loss and correct count of one evaluation batch, on the batch's device, not yet read.
struct BatchStats {
  Tensor loss, correct;
  int64_t count = 0;
};
BatchStats batch_stats(const Tensor& logits, const Tensor& targets) {
  BatchStats s;
  s.loss = batch_loss(logits, targets);
  s.count = targets.numel();
  s.correct = sum(cast(eq(argmax(logits.reshape({-1, logits.size(-1)}), 1), targets.reshape({-1})), DType::i64));
  return s;
}

// `forward` under the precision's autocast, its logits returned as float32 (a classifier's
// logits are small): the loss, the accuracy and the checks on them see float32.
Forward in_precision(const Forward& forward, Precision p) {
  const std::optional<DType> low = autocast_dtype_for(p);
  if (!low) return forward;
  return [forward, low](const Tensor& inputs) {
    Tensor logits;
    {
      AutocastGuard autocast(low);
      logits = forward(inputs);
    }
    return logits.to(DType::f32);
  };
}

}  // namespace

EvalResult evaluate(nn::Module& model, const Forward& forward, BatchSource& data, dist::Communicator* comm) {
  const bool was_training = model.is_training();
  model.eval();
  NoGradGuard no_grad;
  std::optional<DeviceSum> loss_sum, correct;  // made on the first batch's device
  int64_t count = 0;
  data.start_epoch(0);
  Tensor inputs, targets;
  while (data.next(inputs, targets)) {
    if (inputs.size(0) == 0) continue;  // this rank's share of a short last batch
    BatchStats s = batch_stats(forward(inputs), targets);
    if (!loss_sum) {
      loss_sum.emplace(s.loss.device());
      correct.emplace(s.loss.device());
    }
    loss_sum->add(s.loss, double(s.count));
    correct->add(s.correct);
    count += s.count;
  }
  model.train(was_training);
  std::vector<double> v = loss_sum ? read_values({loss_sum->tensor(), correct->tensor()}) : std::vector<double>{0, 0};
  v.push_back(double(count));
  if (comm) v = comm->all_reduce(v, dist::ReduceOp::sum, "the evaluation sums");
  check<ValueError>(v[2] > 0, "evaluate: empty dataset");
  return {v[0] / v[2], v[1] / v[2]};
}

EvalResult evaluate(nn::Module& model, const Forward& forward, const LabelledData& data, int64_t batch_size) {
  TensorBatches batches(data, batch_size, false);
  return evaluate(model, forward, batches);
}

namespace {

void check_inputs(BatchSource& train, BatchSource& val, BatchSource& test, const TrainOptions& o) {
  check<ValueError>(o.epochs >= 1, "fit: epochs must be positive");
  if (o.test_last) {
    check<ValueError>(train.examples() > 0 && test.examples() > 0, "fit: train and test sets must be non-empty");
    return;
  }
  check<ValueError>(train.examples() > 0 && val.examples() > 0 && test.examples() > 0,
                    "fit: train, validation and test sets must be non-empty");
  check<ValueError>(o.evals_per_epoch >= 1 && o.evals_per_epoch <= train.batches_per_epoch(),
                    "fit: train.evals_per_epoch is ", o.evals_per_epoch, ", expected 1 to the ",
                    train.batches_per_epoch(), " training batches of an epoch");
}

// The epoch loop's part of the training loop (step_loop.h): one batch a step, epoch after
// epoch over the shuffled training set; validations at evenly spaced batches of each epoch, the
// best-validation weights kept (checkpointed when the run has a folder); the epoch records.
class EpochRun final : public TrainingRun {
 public:
  EpochRun(nn::Module& model, const Forward& forward, BatchSource& train, BatchSource& val, BatchSource& test,
           const TrainOptions& o, const std::string& checkpoint, RunLog& log, TrainResult& result)
      : model_(model),
        forward_(forward),
        train_(train),
        val_(val),
        test_(test),
        o_(o),
        checkpoint_(checkpoint),
        log_(log),
        result_(result),
        per_epoch_(train.batches_per_epoch()) {}

  bool next_step(int64_t step, std::vector<MicroBatch>& batches) override {
    Tensor inputs, targets;
    while (epoch_ == 0 || !train_.next(inputs, targets)) {
      if (epoch_ > 0) end_epoch();
      if (epoch_ == o_.epochs) return false;
      begin_epoch();
    }
    const int64_t rows = inputs.size(0);
    // Data-parallel: this rank's share of the batch weighs its loss, so the summed gradient is
    // the whole batch's mean.
    dist::Communicator* comm = o_.comm;
    all_rows_ =
        comm ? comm->all_reduce({double(rows)}, dist::ReduceOp::sum, cat("the batch sizes at step ", step + 1))[0]
             : double(rows);
    batches.push_back({inputs, targets, comm ? double(rows) / all_rows_ : 1.0, 0});
    return true;
  }

  Tensor loss(const MicroBatch& b) override { return batch_loss(forward_(b.inputs), b.targets); }

  void stepped(const StepOutcome& out) override {
    if (out.counts_loss()) {
      epoch_loss_ += out.loss * all_rows_;
      epoch_examples_ += int64_t(all_rows_);
    }
    ++batch_;
  }

  MetricsRecord log_record(const LogWindow& w) override {
    return StepRecord{epoch_, w.step, w.loss, w.lr, w.grad_norm, w.steps_per_second()};
  }

  // Validation k of the epoch follows batch ceil(k * per_epoch / evals_per_epoch).
  bool evaluation_due(int64_t) override { return !o_.test_last && batch_ * o_.evals_per_epoch / per_epoch_ > evals_; }

  std::optional<Divergence> evaluate(int64_t step, const LoopState&) override {
    ++evals_;
    const double at = double(epoch_ - 1) + double(batch_) / double(per_epoch_);
    last_val_ = loops::evaluate(model_, forward_, val_, o_.comm);
    const ValRecord record{at, step, last_val_.loss, last_val_.accuracy};
    log_.record(record);
    // Weights gone non-finite through finite steps (e.g. an overflow): the validation is logged,
    // but not part of the result's curve.
    if (!std::isfinite(last_val_.loss))
      return Divergence{step, epoch_,
                        cat("non-finite validation loss (", describe_value(last_val_.loss), ") at epoch ", at)};
    result_.validations.push_back(record);
    if (last_val_.accuracy > result_.best_val_accuracy) {
      result_.best_val_accuracy = last_val_.accuracy;
      keep_weights(epoch_, at);
    }
    return std::nullopt;
  }

  int64_t epoch() const override { return epoch_; }
  // test_last: the test split's loss and accuracy after the last epoch that ended.
  const std::optional<EvalResult>& last_test() const { return last_test_; }

  // The weights the test set sees: those of epoch `epoch` (`at` fractional), now.
  void keep_weights(int64_t epoch, double at) {
    result_.best_epoch = epoch;
    result_.tested_epoch = at;
    if (!checkpoint_.empty()) model_.save(checkpoint_, {{"epoch", std::to_string(epoch)}});
    else
      for (auto& [name, t] : model_.state_dict()) best_weights_[name] = t.clone();
  }
  // Back to the kept weights.
  void restore_weights() {
    if (!checkpoint_.empty()) model_.load(checkpoint_);
    else model_.load_state_dict(best_weights_);
  }

 private:
  void begin_epoch() {
    ++epoch_;
    model_.train();
    train_.start_epoch(epoch_ - 1);
    epoch_loss_ = 0;
    epoch_examples_ = batch_ = evals_ = 0;
  }
  void end_epoch() {
    EpochRecord record{epoch_,         epoch_loss_ / double(std::max<int64_t>(epoch_examples_, 1)),
                       last_val_.loss, last_val_.accuracy,
                       std::nullopt,   std::nullopt};
    if (o_.test_last) {  // no validation: the test split monitors the epoch (the curves' accuracy)
      last_test_ = loops::evaluate(model_, forward_, test_, o_.comm);
      record.test_loss = last_test_->loss;
      record.test_accuracy = last_test_->accuracy;
    }
    log_.record(record);
    result_.epochs.push_back(record);
  }

  nn::Module& model_;
  const Forward& forward_;
  BatchSource &train_, &val_, &test_;
  const TrainOptions& o_;
  const std::string checkpoint_;
  RunLog& log_;
  TrainResult& result_;
  const int64_t per_epoch_;
  int64_t epoch_ = 0, batch_ = 0, evals_ = 0, epoch_examples_ = 0;
  double epoch_loss_ = 0, all_rows_ = 0;
  EvalResult last_val_{NAN, NAN};
  std::optional<EvalResult> last_test_;  // test_last: the monitor after the last epoch ended
  std::map<std::string, Tensor> best_weights_;
};

}  // namespace

TrainResult fit(nn::Module& model, const Forward& model_forward, Optimizer& optimizer, const LRSchedule& schedule,
                BatchSource& train, BatchSource& val, BatchSource& test, const TrainOptions& o) {
  check_inputs(train, val, test, o);
  const Forward forward = in_precision(model_forward, o.precision);
  const int64_t total = train.batches_per_epoch() * o.epochs;
  dist::Communicator* comm = o.comm;
  const bool writer = dist::is_writer(comm);  // the others keep their best weights in memory
  const std::filesystem::path dir = writer ? o.dir : std::filesystem::path();
  RunLog log({dir, o.label, total, o.log_every, std::nullopt});
  Progress& progress = log.progress();
  if (comm) dist::check_identical(*comm, dist::digest(model.state_dict()), "initial weights");
  TrainResult result;
  result.best_val_accuracy = o.test_last ? NAN : -1;
  EpochRun run(model, forward, train, val, test, o, dir.empty() ? "" : (dir / "checkpoint.safetensors").string(), log,
               result);
  StepLoop loop(optimizer, optimizer.params(), schedule, {step_settings(o), total, o.log_every}, log);
  const double wait_before = train.wait_seconds();
  const LoopResult done = loop.run(run);
  result.diverged = done.diverged;
  if (o.test_last && !result.diverged) run.keep_weights(o.epochs, double(o.epochs));
  result.seconds = done.seconds;
  if (comm) progress.message(loop.reduce_summary(done.train_seconds()));
  result.steps = loop.state().step;
  result.skipped_steps = loop.state().skipped;
  result.steps_per_second = double(result.steps) / result.seconds;
  result.data_wait_seconds = train.wait_seconds() - wait_before;
  if (result.diverged) {  // no test accuracy from weights that went non-finite
    result.test_accuracy = result.test_loss = NAN;
    if (!o.test_last && result.best_epoch == 0) result.best_val_accuracy = 0;  // no validation happened
    progress.finish(cat("diverged at step ", result.diverged->step, ": ", result.diverged->reason));
    return result;
  }
  // The test set sees the best-validation weights, or the last ones (their monitor is that test).
  if (!o.test_last) run.restore_weights();
  const EvalResult t = o.test_last && run.last_test() ? *run.last_test() : evaluate(model, forward, test, comm);
  if (o.test_last && !std::isfinite(t.loss)) {  // nothing validated the last weights
    result.diverged = Divergence{result.steps, o.epochs,
                                 cat("non-finite test loss (", describe_value(t.loss), ") after the last epoch")};
    result.test_accuracy = result.test_loss = NAN;
    progress.finish(cat("diverged: ", result.diverged->reason));
    return result;
  }
  result.test_accuracy = t.accuracy;
  result.test_loss = t.loss;
  log.record(TestRecord{result.best_epoch, result.best_val_accuracy, t.accuracy, t.loss, result.seconds,
                        result.data_wait_seconds});
  if (o.test_last) progress.finish(cat("test acc ", t.accuracy, " (the weights after epoch ", result.best_epoch, ")"));
  else
    progress.finish(
        cat("best val acc ", result.best_val_accuracy, " (epoch ", result.tested_epoch, "), test acc ", t.accuracy));
  return result;
}

TrainResult fit(nn::Module& model, const Forward& forward, Optimizer& optimizer, const LRSchedule& schedule,
                const LabelledData& train, const LabelledData& val, const LabelledData& test, const TrainOptions& o) {
  check<ValueError>(o.batch_size >= 1, "fit: batch_size must be positive");
  const data::Shard shard = dist::shard_of(o.comm);
  TensorBatches tr(train, o.batch_size, true, o.shuffle_seed, shard), va(val, o.eval_batch_size, false, 0, shard),
      te(test, o.eval_batch_size, false, 0, shard);
  return fit(model, forward, optimizer, schedule, tr, va, te, o);
}

}  // namespace qkv::loops
