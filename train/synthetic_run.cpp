#include "train/synthetic_run.h"

#include <omp.h>

#include <filesystem>
#include <memory>

#include "train/data/synthetic.h"
#include "train/optim/adam.h"
#include "train/optim/schedule.h"
#include "train/optim/sgd.h"
#include "train/trainer.h"

namespace qkv::train {

using experiment::Config;

nn::EncoderConfig encoder_config(const Config& c) {
  nn::EncoderConfig e;
  e.vocab = c.task.vocab;
  e.classes = c.task.vocab;
  e.layers = c.model.layers;
  e.ffn_hidden = int64_t(c.model.ffn_mult * c.model.d_model + 0.5);
  e.activation = c.model.activation == experiment::Activation::gelu ? nn::Activation::gelu : nn::Activation::relu;
  e.pre_norm = c.model.norm == experiment::Norm::pre;
  e.dropout = c.model.dropout;
  e.mlp_head = c.model.head == experiment::HeadKind::mlp;
  e.attention.d_model = c.model.d_model;
  e.attention.heads = c.model.heads;
  e.attention.kv_heads = c.model.kv_heads;
  e.attention.sharing = nn::parse_sharing(c.model.sharing);
  e.attention.pos2d = c.model.pos2d ? c.model.pos2d_channels : 0;
  return e;
}

namespace {

std::unique_ptr<Optimizer> make_optimizer(const experiment::OptimConfig& o, const nn::NamedTensors& params) {
  switch (o.name) {
    case experiment::OptimName::adam:
    case experiment::OptimName::adamw: {
      AdamOptions a;
      a.lr = o.lr;
      a.beta1 = o.beta1;
      a.beta2 = o.beta2;
      a.eps = o.eps;
      a.weight_decay = o.weight_decay;
      if (o.name == experiment::OptimName::adam) return std::make_unique<Adam>(params, a);
      return std::make_unique<AdamW>(params, a);
    }
    case experiment::OptimName::sgd: {
      SGDOptions s;
      s.lr = o.lr;
      s.momentum = o.momentum;
      s.weight_decay = o.weight_decay;
      return std::make_unique<SGD>(params, s);
    }
  }
  throw ValueError("unknown optimizer");
}

std::unique_ptr<LRSchedule> make_schedule(const Config& c, int64_t steps_per_epoch) {
  const int64_t total = steps_per_epoch * c.train.epochs;
  switch (c.schedule.name) {
    case experiment::ScheduleName::cosine:
      return std::make_unique<CosineWarmup>(c.optim.lr, int64_t(c.schedule.warmup * double(total)), total,
                                            c.schedule.min_lr);
    case experiment::ScheduleName::multistep: {
      std::vector<int64_t> milestones;   // configured in epochs, applied per step
      for (int e : c.schedule.milestones) milestones.push_back(int64_t(e) * steps_per_epoch);
      return std::make_unique<MultiStepLR>(c.optim.lr, milestones, c.schedule.gamma);
    }
    case experiment::ScheduleName::constant:
      return std::make_unique<ConstantLR>(c.optim.lr);
  }
  throw ValueError("unknown schedule");
}

LabelledData on(const SequenceData& d, const Device& dev) { return {d.inputs.to(dev), d.targets.to(dev)}; }

}  // namespace

nlohmann::json run_synthetic(const experiment::Run& run, const experiment::RunDir& dir) {
  const Config& c = run.config;
  const Device device(c.train.device);
  check_device_usable(device, "train.device");
  if (c.train.threads > 0) omp_set_num_threads(c.train.threads);

  const SyntheticTask task = parse_synthetic_task(std::string(experiment::enum_name(c.task.name)));
  const SyntheticSplits data = make_synthetic_splits(task, c.task.length, c.task.vocab, c.task.train_size,
                                                     c.task.val_size, c.task.test_size, uint64_t(c.task.data_seed));
  Generator gen(uint64_t(run.seed));
  nn::Encoder model(encoder_config(c), &gen);
  model.to(device);
  auto optimizer = make_optimizer(c.optim, model.named_parameters());
  const int64_t steps_per_epoch = (c.task.train_size + c.train.batch_size - 1) / c.train.batch_size;
  auto schedule = make_schedule(c, steps_per_epoch);

  TrainOptions o;
  o.epochs = c.train.epochs;
  o.batch_size = c.train.batch_size;
  o.eval_batch_size = c.train.eval_batch_size;
  o.clip = c.optim.clip;
  o.log_every = c.train.log_every;
  o.shuffle_seed = uint64_t(run.seed) + 0x9e3779b97f4a7c15ull;   // a stream apart from the init's
  o.checkpoint_path = (dir.path() / "checkpoint.safetensors").string();
  o.metrics_path = (dir.path() / "metrics.jsonl").string();
  o.log_path = (dir.path() / "train.log").string();
  o.label = cat(c.name, " ", run.id);
  std::filesystem::remove(o.metrics_path);   // a restarted run logs afresh
  std::filesystem::remove(o.log_path);
  auto forward = [&](const Tensor& ids) { return model.forward(ids); };
  const TrainResult r = fit(model, forward, *optimizer, *schedule, on(data.train, device), on(data.val, device),
                            on(data.test, device), o);

  nlohmann::json point = nlohmann::json::object();
  for (const auto& [k, v] : run.point) point[k] = v;
  nlohmann::json epochs = nlohmann::json::array();
  for (const EpochRecord& e : r.epochs)
    epochs.push_back({{"epoch", e.epoch}, {"train_loss", e.train_loss}, {"val_loss", e.val_loss},
                      {"val_accuracy", e.val_accuracy}});
  nlohmann::json result = {{"experiment", c.name},
                           {"task", synthetic_task_name(task)},
                           {"run", run.id},
                           {"variant", run.variant.name},
                           {"seed", run.seed},
                           {"point", point},
                           {"params", model.num_parameters()},
                           {"test_accuracy", r.test_accuracy},
                           {"test_loss", r.test_loss},
                           {"best_val_accuracy", r.best_val_accuracy},
                           {"best_epoch", r.best_epoch},
                           {"steps", r.steps},
                           {"seconds", r.seconds},
                           {"steps_per_second", r.steps_per_second},
                           {"epochs", epochs}};
  dir.write_result(result);
  return result;
}

}  // namespace qkv::train
