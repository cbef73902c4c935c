// The training loop shared by the classification tasks: per-token (synthetic tasks, logits
// [B, T, C] against targets [B, T]), per-example (vision, [B, C] against [B]) and per-set
// (anomaly: [B, n] scores against the odd element's index) alike, since all flatten to rows of
// logits. Epochs over a shuffled training set, an optimizer step with
// global-norm clipping and a per-step learning-rate schedule, validation after every epoch, the
// best-validation weights checkpointed and evaluated on the test set at the end. Metrics go to
// a JSONL file, one object per line.
#pragma once
#include <functional>
#include <string>

#include "nn/module.h"
#include "train/optim/optimizer.h"
#include "train/optim/schedule.h"

namespace qkv::train {

// A labelled dataset held as two tensors with the example index first.
struct LabelledData {
  Tensor inputs;    // [N, ...]
  Tensor targets;   // [N] or [N, T], int64
  int64_t size() const { return inputs.defined() ? inputs.size(0) : 0; }
};

// Where batches come from: tensors in memory (TensorBatches) or an image loader feeding worker
// threads (train/data/image_loader.h). Batches arrive on the model's device.
class BatchSource {
 public:
  virtual ~BatchSource() = default;
  virtual int64_t batches_per_epoch() const = 0;
  virtual int64_t examples() const = 0;
  virtual void start_epoch(int64_t epoch) = 0;            // 0-based
  virtual bool next(Tensor& inputs, Tensor& targets) = 0;  // false at the end of the epoch
  virtual double wait_seconds() const { return 0; }        // time spent waiting for data
};

// Batches of a LabelledData, in order or shuffled per epoch from the Philox stream `seed`.
class TensorBatches : public BatchSource {
 public:
  TensorBatches(LabelledData data, int64_t batch_size, bool shuffle, uint64_t seed = 0);
  int64_t batches_per_epoch() const override;
  int64_t examples() const override { return data_.size(); }
  void start_epoch(int64_t epoch) override;
  bool next(Tensor& inputs, Tensor& targets) override;

 private:
  LabelledData data_;
  int64_t batch_size_;
  bool shuffle_;
  uint64_t seed_;
  Tensor order_;
  int64_t cursor_ = 0;
};

struct TrainOptions {
  int64_t epochs = 1;
  int64_t batch_size = 128;
  int64_t eval_batch_size = 512;
  double clip = 0;                  // global gradient-norm clip; 0: none
  int64_t log_every = 50;           // steps between progress lines / metric records
  uint64_t shuffle_seed = 0;
  std::string checkpoint_path;      // best-validation weights (safetensors); empty: kept in memory
  std::string metrics_path;         // JSONL metrics; empty: none
  std::string log_path;             // plain-text progress log; empty: none
  std::string label = "train";      // progress line prefix
};

struct EpochRecord {
  int64_t epoch = 0;
  double train_loss = 0, val_loss = 0, val_accuracy = 0;
};

struct TrainResult {
  double best_val_accuracy = 0;
  int64_t best_epoch = 0;
  double test_accuracy = 0, test_loss = 0;
  double seconds = 0, steps_per_second = 0;
  double data_wait_seconds = 0;     // training time spent waiting for batches
  int64_t steps = 0;
  std::vector<EpochRecord> epochs;
};

struct EvalResult { double loss = 0, accuracy = 0; };

using Forward = std::function<Tensor(const Tensor& inputs)>;   // inputs batch -> logits

// Mean cross-entropy and accuracy over one pass of `data` in eval mode, without a graph.
EvalResult evaluate(nn::Module& model, const Forward& forward, BatchSource& data);
EvalResult evaluate(nn::Module& model, const Forward& forward, const LabelledData& data, int64_t batch_size);

TrainResult fit(nn::Module& model, const Forward& forward, Optimizer& optimizer, const LRSchedule& schedule,
                BatchSource& train, BatchSource& val, BatchSource& test, const TrainOptions& options);
// The same over tensors in memory: training batches shuffled by options.shuffle_seed.
TrainResult fit(nn::Module& model, const Forward& forward, Optimizer& optimizer, const LRSchedule& schedule,
                const LabelledData& train, const LabelledData& val, const LabelledData& test,
                const TrainOptions& options);

}  // namespace qkv::train
