// The pieces every experiment run shares, whatever its task: the optimizer and schedule a
// config names, the trainer's options and files inside the run folder, the attention settings
// of the model, and the result row written when the run ends.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>

#include "nn/attention.h"
#include "lab/experiment/run_dir.h"
#include "lab/experiment/sweep.h"
#include "train/optim/adam.h"
#include "train/optim/optimizer.h"
#include "train/optim/schedule.h"
#include "train/loops/epoch_loop.h"

namespace qkv::tasks {

// optim::Adam/AdamW settings of optim.* (lr, betas, eps, weight decay).
optim::AdamOptions adam_options(const experiment::OptimConfig& o);
std::unique_ptr<optim::Optimizer> make_optimizer(const experiment::OptimConfig& o, const optim::NamedTensors& params);
// Schedules count optimizer steps; multistep milestones are given in epochs.
std::unique_ptr<optim::LRSchedule> make_schedule(const experiment::Config& c, int64_t steps_per_epoch);
// The attention of model.*: width, heads, the variant's sharing, KV heads and 2D scores.
nn::AttentionConfig attention_config(const experiment::ModelConfig& m);
nn::Activation activation(const experiment::ModelConfig& m);
// Epochs, batch sizes, clipping and logging from the config; checkpoint, metrics and log files
// in the run folder (previous metrics and logs removed: a restarted run logs afresh).
loops::TrainOptions train_options(const experiment::Run& run, const experiment::RunDir& dir);
// Sets the CPU thread count (train.threads) and checks train.device is usable; returns it.
Device prepare_device(const experiment::Config& c);
// The result row: the run's identity, the trainer's numbers and `extra` fields.
nlohmann::json result_row(const experiment::Run& run, const std::string& task, int64_t params, const loops::TrainResult& r,
                          const nlohmann::json& extra = nlohmann::json::object());

}  // namespace qkv::tasks
