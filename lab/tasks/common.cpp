#include "lab/tasks/common.h"

#include <omp.h>

#include <filesystem>

#include "train/optim/adam.h"
#include "train/optim/sgd.h"

namespace qkv::tasks {

using experiment::Config;

optim::AdamOptions adam_options(const experiment::OptimConfig& o) {
  optim::AdamOptions a;
  a.lr = o.lr;
  a.beta1 = o.beta1;
  a.beta2 = o.beta2;
  a.eps = o.eps;
  a.weight_decay = o.weight_decay;
  return a;
}

std::unique_ptr<optim::Optimizer> make_optimizer(const experiment::OptimConfig& o, const optim::NamedTensors& params) {
  switch (o.name) {
    case experiment::OptimName::adam:
    case experiment::OptimName::adamw: {
      const optim::AdamOptions a = adam_options(o);
      if (o.name == experiment::OptimName::adam) return std::make_unique<optim::Adam>(params, a);
      return std::make_unique<optim::AdamW>(params, a);
    }
    case experiment::OptimName::sgd: {
      optim::SGDOptions s;
      s.lr = o.lr;
      s.momentum = o.momentum;
      s.weight_decay = o.weight_decay;
      return std::make_unique<optim::SGD>(params, s);
    }
  }
  throw ValueError("unknown optimizer");
}

std::unique_ptr<optim::LRSchedule> make_schedule(const Config& c, int64_t steps_per_epoch) {
  const int64_t total = steps_per_epoch * c.train.epochs;
  switch (c.schedule.name) {
    case experiment::ScheduleName::cosine:
      return std::make_unique<optim::CosineWarmup>(c.optim.lr, int64_t(c.schedule.warmup * double(total)), total,
                                            c.schedule.min_lr);
    case experiment::ScheduleName::multistep: {
      std::vector<int64_t> milestones;
      for (int e : c.schedule.milestones) milestones.push_back(int64_t(e) * steps_per_epoch);
      return std::make_unique<optim::MultiStepLR>(c.optim.lr, milestones, c.schedule.gamma);
    }
    case experiment::ScheduleName::constant:
      return std::make_unique<optim::ConstantLR>(c.optim.lr);
  }
  throw ValueError("unknown schedule");
}

nn::AttentionConfig attention_config(const experiment::ModelConfig& m) {
  nn::AttentionConfig a;
  a.d_model = m.d_model;
  a.heads = m.heads;
  a.kv_heads = m.kv_heads;
  a.sharing = nn::parse_sharing(m.sharing);
  a.pos2d = m.pos2d ? m.pos2d_channels : 0;
  return a;
}

nn::Activation activation(const experiment::ModelConfig& m) {
  return m.activation == experiment::Activation::gelu ? nn::Activation::gelu : nn::Activation::relu;
}

loops::TrainOptions train_options(const experiment::Run& run, const experiment::RunDir& dir) {
  const Config& c = run.config;
  loops::TrainOptions o;
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
  std::filesystem::remove(o.metrics_path);
  std::filesystem::remove(o.log_path);
  return o;
}

Device prepare_device(const Config& c) {
  const Device device(c.train.device);
  check_device_usable(device, "train.device");
  if (c.train.threads > 0) omp_set_num_threads(c.train.threads);
  return device;
}

nlohmann::json result_row(const experiment::Run& run, const std::string& task, int64_t params, const loops::TrainResult& r,
                          const nlohmann::json& extra) {
  nlohmann::json point = nlohmann::json::object();
  for (const auto& [k, v] : run.point) point[k] = v;
  nlohmann::json epochs = nlohmann::json::array();
  for (const loops::EpochRecord& e : r.epochs)
    epochs.push_back({{"epoch", e.epoch}, {"train_loss", e.train_loss}, {"val_loss", e.val_loss},
                      {"val_accuracy", e.val_accuracy}});
  nlohmann::json row = {{"experiment", run.config.name},
                        {"task", task},
                        {"run", run.id},
                        {"variant", run.variant.name},
                        {"seed", run.seed},
                        {"point", point},
                        {"params", params},
                        {"test_accuracy", r.test_accuracy},
                        {"test_loss", r.test_loss},
                        {"best_val_accuracy", r.best_val_accuracy},
                        {"best_epoch", r.best_epoch},
                        {"steps", r.steps},
                        {"seconds", r.seconds},
                        {"steps_per_second", r.steps_per_second},
                        {"data_wait_fraction", r.seconds > 0 ? r.data_wait_seconds / r.seconds : 0.0},
                        {"epochs", epochs}};
  for (auto& [k, v] : extra.items()) row[k] = v;
  return row;
}

}  // namespace qkv::tasks
