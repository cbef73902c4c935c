#include "train/loops/epoch_loop.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>

#include "autograd/autocast.h"
#include "io/safetensors.h"
#include "train/dist/consistency.h"
#include "train/loops/host_values.h"
#include "train/loops/optimizer_step.h"
#include "train/loops/preflight_step.h"
#include "train/loops/run_log.h"

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

}  // namespace

TrainResult fit(nn::Module& model, const Forward& model_forward, Optimizer& optimizer, const LRSchedule& schedule,
                BatchSource& train, BatchSource& val, BatchSource& test, const TrainOptions& o) {
  check_inputs(train, val, test, o);
  const Forward forward = in_precision(model_forward, o.precision);
  const int64_t per_epoch = train.batches_per_epoch(), total = per_epoch * o.epochs;
  dist::Communicator* comm = o.comm;
  const bool writer = dist::is_writer(comm);  // the others keep their best weights in memory
  const std::filesystem::path dir = writer ? o.dir : std::filesystem::path();
  RunLog log({dir, o.label, total, o.log_every, std::nullopt});
  Progress& progress = log.progress();
  const std::string checkpoint = dir.empty() ? "" : (dir / "checkpoint.safetensors").string();
  if (comm) dist::check_identical(*comm, dist::digest(model.state_dict()), "initial weights");
  OptimizerStep opt_step(optimizer, optimizer.params(), step_settings(o));
  TrainResult result;
  std::map<std::string, Tensor> best_weights;
  result.best_val_accuracy = o.test_last ? NAN : -1;
  auto keep_weights = [&](int64_t epoch, double at) {
    result.best_epoch = epoch;
    result.tested_epoch = at;
    if (!checkpoint.empty()) model.save(checkpoint, {{"epoch", std::to_string(epoch)}});
    else
      for (auto& [name, t] : model.state_dict()) best_weights[name] = t.clone();
  };
  // One validation after `batch` batches of `epoch`; false when its loss is not finite (diverged).
  EvalResult last_val{NAN, NAN};
  auto validate = [&](int64_t epoch, int64_t batch, int64_t step) {
    const double at = double(epoch - 1) + double(batch) / double(per_epoch);
    last_val = evaluate(model, forward, val, comm);
    const ValRecord record{at, step, last_val.loss, last_val.accuracy};
    log.record(record);
    // Weights gone non-finite through finite steps (e.g. an overflow): the validation is logged,
    // but not part of the result's curve.
    if (!std::isfinite(last_val.loss)) {
      result.diverged =
          Divergence{step, epoch,
                     cat("non-finite validation loss (", describe_value(last_val.loss), ") at epoch ", at)};
      progress.message(cat("epoch ", at, ": run stopped as diverged: ", result.diverged->reason));
      return false;
    }
    result.validations.push_back(record);
    if (last_val.accuracy > result.best_val_accuracy) {
      result.best_val_accuracy = last_val.accuracy;
      keep_weights(epoch, at);
    }
    return true;
  };
  const auto start = std::chrono::steady_clock::now();
  const double wait_before = train.wait_seconds();
  int64_t step = 0;
  for (int64_t epoch = 1; epoch <= o.epochs && !result.diverged; ++epoch) {
    model.train();
    train.start_epoch(epoch - 1);
    double epoch_loss = 0;
    int64_t epoch_examples = 0, batch = 0, evals = 0;
    Tensor inputs, targets;
    while (train.next(inputs, targets)) {
      const double lr = schedule.lr_at(step);
      const int64_t rows = inputs.size(0);
      // Data-parallel: this rank's share of the batch weighs its loss, so the summed gradient
      // is the whole batch's mean.
      const double all_rows =
          comm ? comm->all_reduce({double(rows)}, dist::ReduceOp::sum, cat("the batch sizes at step ", step + 1))[0]
               : double(rows);
      if (step == 0 && rows > 0)
        preflight_step(optimizer, true, [&] { batch_loss(forward(inputs), targets).backward(); });
      opt_step.begin(step, lr);
      opt_step.arm_reduce();
      Tensor loss_t = zeros({}, TensorOptions(DType::f32, inputs.device()));
      if (rows > 0) {
        loss_t = batch_loss(forward(inputs), targets);
        if (comm) loss_t = loss_t * (double(rows) / all_rows);
        opt_step.backward(loss_t);
      }
      const StepOutcome out = opt_step.finish(loss_t, log, epoch);
      if (out.action == StepAction::stop) {
        result.diverged = opt_step.diverged();
        break;
      }
      if (out.counts_loss()) {
        epoch_loss += out.loss * all_rows;
        epoch_examples += int64_t(all_rows);
      }
      ++step;
      ++batch;
      result.skipped_steps += !out.applied;
      progress.update(step, out.loss, lr);
      if (step % o.log_every == 0)
        log.record(StepRecord{epoch, step, out.loss, lr, out.norm, progress.steps_per_second()});
      // Validation k of the epoch follows batch ceil(k * per_epoch / evals_per_epoch).
      if (!o.test_last && batch * o.evals_per_epoch / per_epoch > evals) {
        ++evals;
        if (!validate(epoch, batch, step)) break;
      }
    }
    if (result.diverged) break;
    const EpochRecord record{epoch, epoch_loss / double(std::max<int64_t>(epoch_examples, 1)), last_val.loss,
                             last_val.accuracy};
    log.record(record);
    result.epochs.push_back(record);
  }
  if (o.test_last && !result.diverged) keep_weights(o.epochs, double(o.epochs));
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (comm) progress.message(opt_step.reduce_summary(result.seconds));
  result.steps = step;
  result.steps_per_second = double(step) / result.seconds;
  result.data_wait_seconds = train.wait_seconds() - wait_before;
  if (result.diverged) {  // no test accuracy from weights that went non-finite
    result.test_accuracy = result.test_loss = NAN;
    if (!o.test_last && result.best_epoch == 0) result.best_val_accuracy = 0;  // no validation happened
    progress.finish(cat("diverged at step ", result.diverged->step, ": ", result.diverged->reason));
    return result;
  }
  // The test set sees the best-validation weights, or the last ones.
  if (!o.test_last) {
    if (!checkpoint.empty()) model.load(checkpoint);
    else model.load_state_dict(best_weights);
  }
  EvalResult t = evaluate(model, forward, test, comm);
  if (o.test_last && !std::isfinite(t.loss)) {  // nothing validated the last weights
    result.diverged =
        Divergence{step, o.epochs, cat("non-finite test loss (", describe_value(t.loss), ") after the last epoch")};
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
