#include "lab/tasks/common.h"

#include <omp.h>

#include <algorithm>
#include <cstdio>

#include "train/dist/consistency.h"
#include "train/optim/sgd.h"

namespace qkv::tasks {

using namespace experiment;

optim::AdamOptions adam_options(const OptimConfig& o) {
  optim::AdamOptions a;
  a.lr = o.lr;
  a.beta1 = o.beta1;
  a.beta2 = o.beta2;
  a.eps = o.eps;
  a.weight_decay = o.weight_decay;
  return a;
}

std::unique_ptr<optim::Optimizer> make_optimizer(const OptimConfig& o, const optim::NamedTensors& params,
                                                 optim::DecayRule decay) {
  // One group of every parameter, or the decayed ones and the others (optim/optimizer.h).
  auto made = [&](auto options, auto tag) -> std::unique_ptr<optim::Optimizer> {
    using Made = typename decltype(tag)::type;
    if (decay == optim::DecayRule::all) return std::make_unique<Made>(params, options);
    return std::make_unique<Made>(optim::weight_decay_groups(params, o.weight_decay, decay), options);
  };
  switch (o.name) {
    case OptimName::adam: return made(adam_options(o), std::type_identity<optim::Adam>{});
    case OptimName::adamw: return made(adam_options(o), std::type_identity<optim::AdamW>{});
    case OptimName::sgd: {
      optim::SGDOptions s;
      s.lr = o.lr;
      s.momentum = o.momentum;
      s.weight_decay = o.weight_decay;
      return made(s, std::type_identity<optim::SGD>{});
    }
  }
  throw ValueError("unknown optimizer");
}

namespace {
optim::ScheduleKind schedule_kind(ScheduleName n) {
  switch (n) {
    case ScheduleName::cosine: return optim::ScheduleKind::cosine;
    case ScheduleName::multistep: return optim::ScheduleKind::multistep;
    case ScheduleName::constant: return optim::ScheduleKind::constant;
  }
  throw ValueError("unknown schedule");
}

optim::ScheduleSpec base_spec(ScheduleName name, const ScheduleBase& s, double lr, int64_t total) {
  optim::ScheduleSpec spec;
  spec.kind = schedule_kind(name);
  spec.base_lr = lr;
  spec.total_steps = total;
  spec.warmup_fraction = s.warmup;
  spec.warmup_steps = s.warmup_steps;
  spec.min_lr = s.min_lr;
  return spec;
}
}  // namespace

optim::ScheduleSpec schedule_spec(const EpochSchedule& s, double lr, int64_t steps_per_epoch, int64_t epochs) {
  optim::ScheduleSpec spec = base_spec(s.name, s, lr, steps_per_epoch * epochs);
  for (int e : s.milestones) spec.milestones.push_back(int64_t(e) * steps_per_epoch);
  spec.gamma = s.gamma;
  return spec;
}

optim::ScheduleSpec schedule_spec(const StepSchedule& s, double lr, int64_t steps) {
  return base_spec(s.name, s, lr, steps);
}

Device prepare_device(const LoopConfig& loop, dist::Communicator* comm) {
  Device device = loop.device;
  const bool parallel = comm && comm->size() > 1;
  if (parallel && device.is_cuda()) device = Device(DeviceType::cuda, comm->local_rank());  // one GPU per rank
  check_device_usable(device, "train.device");
  if (loop.threads > 0) omp_set_num_threads(loop.threads);
  else if (parallel && comm->local_size() > 1)  // ranks on one node share its cores
    omp_set_num_threads(std::max(1, omp_get_num_procs() / comm->local_size()));
  const std::string note = loops::precision_note(loops::choose_precision(loop.precision, device), device);
  if (!note.empty()) std::printf("%s\n", note.c_str());
  return device;
}

void dropout_per_rank(Generator& gen, dist::Communicator* comm) {
  if (comm) gen.set_state(dist::for_rank(gen.state(), comm->rank()));
}

uint64_t shuffle_seed(const Run& run) { return uint64_t(run.seed) + 0x9e3779b97f4a7c15ull; }

loops::NonfinitePolicy nonfinite_policy(const LoopConfig& loop) {
  return {loop.on_nonfinite, int64_t(loop.max_consecutive_skips)};
}

namespace {
loops::TrainOptions options(const EpochRun& r) {
  loops::TrainOptions o;
  o.epochs = r.train.epochs;
  o.batch_size = r.train.batch_size;
  o.eval_batch_size = r.train.eval_batch_size;
  o.clip = r.optim.clip;
  o.log_every = r.train.log_every;
  o.shuffle_seed = shuffle_seed(r.run);
  o.dir = r.dir.path();
  o.label = cat(r.run.config.name(), " ", r.run.id);
  o.nonfinite = nonfinite_policy(r.train);
  o.evals_per_epoch = r.train.evals_per_epoch;
  o.test_last = r.train.protocol == Protocol::all_last;
  o.comm = r.comm;
  o.bucket_mb = r.train.bucket_mb;
  o.precision = loops::choose_precision(r.train.precision, r.train.device).used;
  return o;
}

loops::TrainResult fit(const EpochRun& r, int64_t steps_per_epoch, auto& train, auto& val, auto& test) {
  auto optimizer = make_optimizer(r.optim, r.model.named_parameters());
  auto schedule = optim::make_schedule(schedule_spec(r.schedule, r.optim.lr, steps_per_epoch, r.train.epochs));
  return loops::fit(r.model, r.forward, *optimizer, *schedule, train, val, test, options(r));
}
}  // namespace

loops::TrainResult train_epochs(const EpochRun& r, data::BatchSource& train, data::BatchSource& val,
                                data::BatchSource& test) {
  return fit(r, train.batches_per_epoch(), train, val, test);
}

loops::TrainResult train_epochs(const EpochRun& r, const data::LabelledData& train, const data::LabelledData& val,
                                const data::LabelledData& test) {
  return fit(r, (train.size() + r.train.batch_size - 1) / r.train.batch_size, train, val, test);
}

namespace {
// train.protocol of a classification family's config.
Protocol protocol_of(const Config& c) {
  switch (c.kind()) {
    case TaskKind::synthetic: return c.as<SyntheticConfig>().train.protocol;
    case TaskKind::vision: return c.as<VisionConfig>().train.protocol;
    case TaskKind::anomaly: return c.as<AnomalyConfig>().train.protocol;
    case TaskKind::lm: break;
  }
  throw ValueError(cat("classification_row: ", c.name(), " is not a classification experiment"));
}
}  // namespace

ResultRow classification_row(const Run& run, const std::string& task, int64_t params, const loops::TrainResult& r) {
  const Protocol protocol = protocol_of(run.config);
  ResultRow row;
  row.experiment = run.config.name();
  row.kind = run.config.kind();
  row.task = task;
  row.run = run.id;
  row.variant = nn::variant_name(run.variant);
  row.seed = run.seed;
  row.point = run.point;
  row.scale = run.scale;
  row.params = params;
  row.metrics = ClassificationResult{r.test_accuracy,
                                     r.test_loss,
                                     r.best_val_accuracy,
                                     r.best_epoch,
                                     r.steps,
                                     r.seconds,
                                     r.steps_per_second,
                                     r.seconds > 0 ? r.data_wait_seconds / r.seconds : 0.0,
                                     r.epochs,
                                     r.skipped_steps,
                                     protocol,
                                     r.tested_epoch,
                                     r.validations};
  row.diverged = r.diverged;
  row.precision = loops::choose_precision(run.config.loop().precision, run.config.loop().device);
  return row;
}

}  // namespace qkv::tasks
