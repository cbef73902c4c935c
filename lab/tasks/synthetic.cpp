#include "lab/tasks/synthetic.h"

#include "train/data/synthetic.h"
#include "lab/tasks/common.h"

namespace qkv::tasks {

using experiment::Config;

nn::EncoderConfig encoder_config(const Config& c) {
  nn::EncoderConfig e;
  e.vocab = c.task.vocab;
  e.classes = c.task.vocab;
  e.layers = c.model.layers;
  e.ffn_hidden = int64_t(c.model.ffn_mult * c.model.d_model + 0.5);
  e.activation = activation(c.model);
  e.pre_norm = c.model.norm == experiment::Norm::pre;
  e.dropout = c.model.dropout;
  e.mlp_head = c.model.head == experiment::HeadKind::mlp;
  e.attention = attention_config(c.model);
  return e;
}

namespace {
data::LabelledData on(const data::SequenceData& d, const Device& dev) { return {d.inputs.to(dev), d.targets.to(dev)}; }
}  // namespace

nlohmann::json run_synthetic(const experiment::Run& run, const experiment::RunDir& dir) {
  const Config& c = run.config;
  const Device device = prepare_device(c);
  const data::SyntheticTask task = data::parse_synthetic_task(std::string(experiment::enum_name(c.task.name)));
  const data::SyntheticSplits data = data::make_synthetic_splits(task, c.task.length, c.task.vocab, c.task.train_size,
                                                     c.task.val_size, c.task.test_size, uint64_t(c.task.data_seed));
  Generator gen(uint64_t(run.seed));
  nn::Encoder model(encoder_config(c), &gen);
  model.to(device);
  auto optimizer = make_optimizer(c.optim, model.named_parameters());
  const int64_t steps_per_epoch = (c.task.train_size + c.train.batch_size - 1) / c.train.batch_size;
  auto schedule = make_schedule(c, steps_per_epoch);
  auto forward = [&](const Tensor& ids) { return model.forward(ids); };
  const loops::TrainResult r = loops::fit(model, forward, *optimizer, *schedule, on(data.train, device), on(data.val, device),
                            on(data.test, device), train_options(run, dir));
  const nlohmann::json result = result_row(run, data::synthetic_task_name(task), model.num_parameters(), r);
  dir.write_result(result);
  return result;
}

}  // namespace qkv::tasks
