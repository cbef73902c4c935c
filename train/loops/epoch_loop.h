// The training loop of the classification families: per-token (synthetic tasks, logits
// [B, T, C] against targets [B, T]), per-example (vision, [B, C] against [B]) and per-set
// (anomaly: [B, n] scores against the odd element's index) alike, since all flatten to rows of
// logits. The training loop of step_loop.h, fed one batch a step: epochs over a shuffled
// training set, an optimizer step with global-norm clipping and a per-step learning-rate
// schedule, and one of two protocols: validation `evals_per_epoch` times per epoch (after evenly
// spaced batches, the last ending the epoch) with the best-validation weights checkpointed and
// tested at the end; or no validation (test_last), the weights after the last epoch
// checkpointed and tested. metrics.jsonl and train.log through RunLog. A step whose loss or
// gradient norm is not finite is not applied (nonfinite.h): it is skipped, or the run stops as
// diverged, as is one whose validation loss is not finite; a diverged run is not evaluated on
// the test set.
//
// Data-parallel: every rank runs this loop on its shard (data/shard.h) of the same batches; each
// scales its loss by its share of the batch, the gradients are summed over the ranks while the
// backward runs (dist/reducer.h), and every decision (skip, stop, best epoch) is taken on the
// summed loss and norm, so all ranks stay identical.
#pragma once
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "nn/module.h"
#include "train/data/batches.h"
#include "train/dist/communicator.h"
#include "train/loops/metrics.h"
#include "train/loops/nonfinite.h"
#include "train/loops/precision.h"
#include "train/optim/optimizer.h"
#include "train/optim/schedule.h"

namespace qkv::loops {

struct TrainOptions {
  int64_t epochs = 1;
  int64_t batch_size = 128;
  int64_t eval_batch_size = 512;
  double clip = 0;         // global gradient-norm clip; 0: none
  int64_t log_every = 50;  // steps between progress lines / metric records
  uint64_t shuffle_seed = 0;
  std::filesystem::path dir;    // run folder: checkpoint.safetensors, metrics.jsonl, train.log;
                                // empty: best weights kept in memory, console only
  std::string label = "train";  // progress line prefix
  NonfinitePolicy nonfinite;    // what a NaN or inf loss or gradient norm does
  int64_t evals_per_epoch = 1;  // validations per epoch; at most the training batches per epoch
  bool test_last = false;       // no validation (the validation set may be empty): test the last weights
  // Data-parallel (null: one process, none of it; a communicator of one rank goes through every
  // collective all the same): the batch sources serve this rank's shard of every batch,
  // gradients and metrics are summed over the ranks, and only rank 0 writes to `dir`.
  dist::Communicator* comm = nullptr;
  double bucket_mb = 25;  // gradient all-reduce bucket size
  // bf16/fp16: the forward and the loss run under autocast (precision.h); logits come back float32;
  // fp16 scales the loss (loss_scale.h).
  Precision precision = Precision::fp32;
};

struct TrainResult {
  double best_val_accuracy = 0;  // NaN with test_last (no validation)
  int64_t best_epoch = 0;        // the epoch (1-based) whose weights were tested
  double tested_epoch = 0;       // the same, fractional: 1.25 = a quarter into epoch 2
  double test_accuracy = 0, test_loss = 0;
  double seconds = 0, steps_per_second = 0;
  double data_wait_seconds = 0;        // training time spent waiting for batches
  int64_t steps = 0;                   // optimizer steps done (applied or skipped)
  int64_t skipped_steps = 0;           // steps not applied for a non-finite loss or gradient norm
  std::vector<EpochRecord> epochs;     // validation fields NaN with test_last
  std::vector<ValRecord> validations;  // every validation, in order
  // Set when the run stopped early; then there is no test evaluation and test_* are NaN.
  std::optional<Divergence> diverged;
};

struct EvalResult {
  double loss = 0, accuracy = 0;
};

using Forward = std::function<Tensor(const Tensor& inputs)>;  // inputs batch -> logits

// Mean cross-entropy and accuracy over one pass of `data` in eval mode, without a graph; with
// `comm`, over every rank's shard.
EvalResult evaluate(nn::Module& model, const Forward& forward, data::BatchSource& data,
                    dist::Communicator* comm = nullptr);
EvalResult evaluate(nn::Module& model, const Forward& forward, const data::LabelledData& data, int64_t batch_size);

TrainResult fit(nn::Module& model, const Forward& forward, optim::Optimizer& optimizer,
                const optim::LRSchedule& schedule, data::BatchSource& train, data::BatchSource& val,
                data::BatchSource& test, const TrainOptions& options);
// The same over tensors in memory: training batches shuffled by options.shuffle_seed.
TrainResult fit(nn::Module& model, const Forward& forward, optim::Optimizer& optimizer,
                const optim::LRSchedule& schedule, const data::LabelledData& train, const data::LabelledData& val,
                const data::LabelledData& test, const TrainOptions& options);

}  // namespace qkv::loops
