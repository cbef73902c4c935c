// The language-model training loop: the loop of step_loop.h over micro-batches of token
// windows with gradient accumulation, a per-step learning-rate schedule, global-norm clipping,
// a step whose gradient norm exceeds a threshold made again on the next batches, validation loss
// and perplexity every eval_every steps, tokens/s and MFU. A step whose loss or gradient norm is not finite is not
// applied (nonfinite.h): it is skipped, or the run stops as diverged, as it does when a
// validation loss is not finite.
//
// Every validation also writes a checkpoint (lm_checkpoint.h). Resuming from it continues
// bit-identically: the same batches, dropout masks and updates, so the loss curve equals an
// uninterrupted run's. metrics.jsonl and train.log are written through RunLog.
#pragma once
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "nn/models/gpt.h"
#include "train/data/tokens/token_batches.h"
#include "train/dist/communicator.h"
#include "train/loops/lm_checkpoint.h"
#include "train/loops/loss_scale.h"
#include "train/loops/metrics.h"
#include "train/loops/nonfinite.h"
#include "train/loops/precision.h"
#include "train/optim/optimizer.h"
#include "train/optim/schedule.h"

namespace qkv::loops {

struct LmTrainOptions {
  int64_t steps = 100;
  int64_t grad_accum = 1;
  int64_t eval_every = 50;
  int64_t eval_batches = 10;
  int64_t keep_checkpoints = 2;
  int64_t log_every = 10;
  Precision precision = Precision::fp32;                 // compute precision (precision.h)
  int64_t loss_scale_growth = kLossScaleGrowthInterval;  // fp16: good steps before the scale doubles
  double clip = 1.0;                                     // 0: no clipping
  double skip_grad_norm = 0;                             // a step above is made again (0: never)
  NonfinitePolicy nonfinite;                             // what a NaN or inf loss or gradient norm does
  double peak_flops = 0;                                 // FLOP/s for MFU; 0: MFU not reported
  std::string peak_source;                               // where peak_flops comes from (printed)
  std::filesystem::path dir;                             // run folder: checkpoints/, metrics.jsonl, train.log
  bool resume = false;                                   // continue from the newest checkpoint in dir, if any
  int64_t stop_after = 0;  // return after this many steps of this call (0: run to the end)
  std::string label = "lm";
  // Data-parallel (null: one process; a communicator of one rank goes through every collective
  // all the same): the batch sources serve this rank's rows
  // (data/shard.h), gradients and losses are summed over the ranks, rank 0 alone writes to `dir`
  // (every rank reads a checkpoint to resume), and tokens/s counts the whole job.
  dist::Communicator* comm = nullptr;
  double bucket_mb = 25;
};

struct LmTrainResult {
  bool finished = false;  // reached `steps` (false after stop_after or a divergence)
  int64_t steps = 0, skipped_steps = 0, resumed_from = 0;
  std::optional<Divergence> diverged;  // set when the run stopped; final_val_loss is then NaN
  double final_val_loss = 0, best_val_loss = 0;
  double tokens_per_second = 0, mfu = 0, seconds = 0;
  std::vector<EvalRecord> evals;       // of this call
  std::vector<int64_t> logged_tokens;  // of this call, per logged tokens/s: the tokens it counts
  LossScaleState loss_scale;           // fp16: the loss scale after the last step
};

// Mean cross-entropy over the first `batches` batches of `data` (seeks to its start, so every
// call reads the same batches when `data` does not shuffle), in eval mode (no dropout); the
// model is left in eval mode. With `comm`, each batch's mean is over every rank's rows; under
// `precision`'s autocast.
double evaluate_lm(nn::GPT& model, data::TokenBatches& data, int64_t batches, dist::Communicator* comm = nullptr,
                   Precision precision = Precision::fp32);

// `gen` is the generator the model's dropout draws from; its counter is checkpointed. `opt` holds
// the model's parameters (the same factory as the other families': lab/tasks/common.h); its
// state is checkpointed and restored on resume.
LmTrainResult train_lm(nn::GPT& model, Generator& gen, optim::Optimizer& opt, data::TokenBatches& train,
                       data::TokenBatches& val, const optim::LRSchedule& schedule, const LmTrainOptions& o);

}  // namespace qkv::loops
