#include "train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tensor/safetensors.h"
#include "train/optim/clip.h"
#include "train/progress.h"

namespace qkv::train {
namespace {

// Rows [begin, end) of an example-major tensor, gathered by a permutation when given.
Tensor rows(const Tensor& t, const Tensor& order, int64_t begin, int64_t end) {
  if (!order.defined()) return t.slice(0, begin, end);
  return index_select(t, 0, order.slice(0, begin, end));
}

// A uniform random permutation of [0, n): the argsort of n uniform keys drawn from `gen`.
Tensor random_permutation(int64_t n, Generator& gen, const Device& device) {
  const std::vector<float> keys = rand({n}, DType::f32, &gen).to_vector<float>();
  std::vector<int64_t> perm(keys.size());
  for (size_t i = 0; i < perm.size(); ++i) perm[i] = int64_t(i);
  std::stable_sort(perm.begin(), perm.end(), [&](int64_t a, int64_t b) { return keys[size_t(a)] < keys[size_t(b)]; });
  return from_vector(perm, {n}, device);
}

// Loss and correct count of one batch; logits [..., C] flattened against targets [...].
struct BatchStats { Tensor loss; int64_t correct = 0, count = 0; };
BatchStats batch_stats(const Tensor& logits, const Tensor& targets) {
  const int64_t C = logits.size(-1);
  Tensor flat = logits.reshape({-1, C}), t = targets.reshape({-1});
  BatchStats s;
  s.loss = cross_entropy(flat, t);
  s.count = t.numel();
  s.correct = sum(cast(eq(argmax(flat.detach(), 1), t), DType::i64)).item<int64_t>();
  return s;
}

class MetricsLog {
 public:
  explicit MetricsLog(const std::string& path) {
    if (path.empty()) return;
    out_.open(path, std::ios::app);
    check<IOError>(bool(out_), path, ": cannot open the metrics log for appending");
  }
  void write(const nlohmann::json& record) {
    if (!out_.is_open()) return;
    out_ << record.dump() << "\n";
    out_.flush();
  }

 private:
  std::ofstream out_;
};

}  // namespace

EvalResult evaluate(nn::Module& model, const Forward& forward, const LabelledData& data, int64_t batch_size) {
  check<ValueError>(data.size() > 0, "evaluate: empty dataset");
  const bool was_training = model.is_training();
  model.eval();
  NoGradGuard no_grad;
  double loss_sum = 0;
  int64_t correct = 0, count = 0;
  for (int64_t b = 0; b < data.size(); b += batch_size) {
    const int64_t e = std::min(data.size(), b + batch_size);
    BatchStats s = batch_stats(forward(data.inputs.slice(0, b, e)), data.targets.slice(0, b, e));
    loss_sum += s.loss.item<double>() * double(s.count);
    correct += s.correct;
    count += s.count;
  }
  model.train(was_training);
  return {loss_sum / double(count), double(correct) / double(count)};
}

TrainResult fit(nn::Module& model, const Forward& forward, Optimizer& optimizer, const LRSchedule& schedule,
                const LabelledData& train, const LabelledData& val, const LabelledData& test,
                const TrainOptions& o) {
  check<ValueError>(train.size() > 0 && val.size() > 0 && test.size() > 0, "fit: train, validation and test sets must be non-empty");
  check<ValueError>(o.epochs >= 1 && o.batch_size >= 1, "fit: epochs and batch_size must be positive");
  const int64_t steps_per_epoch = (train.size() + o.batch_size - 1) / o.batch_size;
  const int64_t total = steps_per_epoch * o.epochs;
  MetricsLog log(o.metrics_path);
  Generator shuffle(o.shuffle_seed);
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> text_log(nullptr, std::fclose);
  if (!o.log_path.empty()) {
    text_log.reset(std::fopen(o.log_path.c_str(), "a"));
    check<IOError>(text_log != nullptr, o.log_path, ": cannot open the training log for appending");
  }
  Progress progress(o.label, total, o.log_every, stdout, text_log.get());
  TrainResult result;
  std::map<std::string, Tensor> best_weights;
  result.best_val_accuracy = -1;
  const auto start = std::chrono::steady_clock::now();
  int64_t step = 0;
  for (int64_t epoch = 1; epoch <= o.epochs; ++epoch) {
    model.train();
    const Tensor order = random_permutation(train.size(), shuffle, train.inputs.device());
    double epoch_loss = 0;
    for (int64_t b = 0; b < train.size(); b += o.batch_size, ++step) {
      const int64_t e = std::min(train.size(), b + o.batch_size);
      const double lr = schedule.lr_at(step);
      optimizer.set_lr(lr);
      BatchStats s = batch_stats(forward(rows(train.inputs, order, b, e)), rows(train.targets, order, b, e));
      optimizer.zero_grad();
      s.loss.backward();
      const double norm = o.clip > 0 ? clip_grad_norm(optimizer.params(), o.clip) : 0.0;
      optimizer.step();
      const double loss = s.loss.item<double>();
      epoch_loss += loss * double(e - b);
      progress.update(step + 1, loss, lr);
      if ((step + 1) % o.log_every == 0)
        log.write({{"epoch", epoch}, {"step", step + 1}, {"loss", loss}, {"lr", lr}, {"grad_norm", norm},
                   {"it_per_s", progress.steps_per_second()}});
    }
    EvalResult v = evaluate(model, forward, val, o.eval_batch_size);
    result.epochs.push_back({epoch, epoch_loss / double(train.size()), v.loss, v.accuracy});
    log.write({{"epoch", epoch}, {"train_loss", result.epochs.back().train_loss}, {"val_loss", v.loss},
               {"val_accuracy", v.accuracy}});
    if (v.accuracy > result.best_val_accuracy) {
      result.best_val_accuracy = v.accuracy;
      result.best_epoch = epoch;
      if (!o.checkpoint_path.empty()) model.save(o.checkpoint_path, {{"epoch", std::to_string(epoch)}});
      else for (auto& [name, t] : model.state_dict()) best_weights[name] = t.clone();
    }
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.steps = step;
  result.steps_per_second = double(step) / result.seconds;
  // The test set sees the best-validation weights.
  if (!o.checkpoint_path.empty()) model.load(o.checkpoint_path);
  else model.load_state_dict(best_weights);
  EvalResult t = evaluate(model, forward, test, o.eval_batch_size);
  result.test_accuracy = t.accuracy;
  result.test_loss = t.loss;
  log.write({{"best_epoch", result.best_epoch}, {"best_val_accuracy", result.best_val_accuracy},
             {"test_accuracy", t.accuracy}, {"test_loss", t.loss}, {"seconds", result.seconds}});
  progress.finish(cat("best val acc ", result.best_val_accuracy, " (epoch ", result.best_epoch, "), test acc ",
                      t.accuracy));
  return result;
}

}  // namespace qkv::train
