// What the runners of every family share: the optimizer and schedule a config names, the device,
// the epoch loop of the classification families, and their result row.
#pragma once
#include <memory>
#include <string>

#include "lab/experiment/run_dir.h"
#include "lab/experiment/sweep.h"
#include "tensor/random.h"
#include "train/loops/epoch_loop.h"
#include "train/optim/adam.h"
#include "train/optim/optimizer.h"
#include "train/optim/schedule.h"

namespace qkv::tasks {

// optim.*'s Adam/AdamW settings (lr, betas, eps, weight decay).
optim::AdamOptions adam_options(const experiment::OptimConfig& o);
// The optimizer of every family's runs: optim.name over `params`, its weight decay on the
// parameters `decay` selects (the language models' optim.decay; the other families decay every
// parameter their optimizer holds).
std::unique_ptr<optim::Optimizer> make_optimizer(const experiment::OptimConfig& o, const optim::NamedTensors& params,
                                                 optim::DecayRule decay = optim::DecayRule::all);
// The schedule settings in steps: epoch schedules (milestones in epochs) and step schedules.
optim::ScheduleSpec schedule_spec(const experiment::EpochSchedule& s, double lr, int64_t steps_per_epoch,
                                  int64_t epochs);
optim::ScheduleSpec schedule_spec(const experiment::StepSchedule& s, double lr, int64_t steps);
// Sets the CPU thread count (train.threads; by default the cores shared among this node's ranks)
// and checks train.device is usable; returns it (data-parallel: cuda becomes cuda:<local rank>).
Device prepare_device(const experiment::LoopConfig& loop, dist::Communicator* comm = nullptr);
// Data-parallel helpers; `comm` null means one process.
// After the weights are drawn (alike on every rank): dropout draws from this rank's own stream.
void dropout_per_rank(Generator& gen, dist::Communicator* comm);
// The Philox stream of a run's data order: apart from the stream its weights are drawn from.
uint64_t shuffle_seed(const experiment::Run& run);
// train.on_nonfinite and train.max_consecutive_skips, for either loop.
loops::NonfinitePolicy nonfinite_policy(const experiment::LoopConfig& loop);

// One run of a classification family through the epoch loop: its model, the sections that
// drive the loop, and where it writes (checkpoint, metrics.jsonl, train.log in the run folder).
struct EpochRun {
  const experiment::Run& run;
  const experiment::RunDir& dir;
  nn::Module& model;
  loops::Forward forward;
  const experiment::OptimConfig& optim;
  const experiment::EpochSchedule& schedule;
  const experiment::EpochTrain& train;
  dist::Communicator* comm = nullptr;  // data-parallel job, or null
};
loops::TrainResult train_epochs(const EpochRun& r, data::BatchSource& train, data::BatchSource& val,
                                data::BatchSource& test);
// The same over splits in memory, the training split shuffled per epoch.
loops::TrainResult train_epochs(const EpochRun& r, const data::LabelledData& train, const data::LabelledData& val,
                                const data::LabelledData& test);

// The result row of a classification run; `task` is its table column.
experiment::ResultRow classification_row(const experiment::Run& run, const std::string& task, int64_t params,
                                         const loops::TrainResult& r);

}  // namespace qkv::tasks
