#include "lab/tasks/synthetic.h"

#include "lab/experiment/models.h"
#include "lab/tasks/common.h"
#include "train/data/synthetic.h"

namespace qkv::tasks {

namespace {
data::LabelledData on(const data::SequenceData& d, const Device& dev) { return {d.inputs.to(dev), d.targets.to(dev)}; }
}  // namespace

experiment::ResultRow run_synthetic(const experiment::Run& run, const experiment::RunDir& dir,
                                    dist::Communicator* comm) {
  const auto& c = run.config.as<experiment::SyntheticConfig>();
  const Device device = prepare_device(c.train, comm);
  const data::SyntheticTask task = c.task.name;
  const data::SyntheticSplits splits =
      data::make_synthetic_splits(task, c.task.length, c.task.vocab, c.task.train_size, c.task.val_size,
                                  c.task.test_size, uint64_t(c.task.data_seed));
  Generator gen(uint64_t(run.seed));
  nn::Encoder model(experiment::encoder_config(c, run.variant), &gen);
  model.to(device);
  dropout_per_rank(gen, comm);
  const loops::TrainResult r = train_epochs({run, dir, model, [&](const Tensor& ids) { return model.forward(ids); },
                                             c.optim, c.schedule, c.train, comm},
                                            on(splits.train, device), on(splits.val, device), on(splits.test, device));
  const experiment::ResultRow row = classification_row(run, data::synthetic_task_name(task), model.num_parameters(), r);
  if (dist::is_writer(comm)) dir.write_result(row);
  return row;
}

}  // namespace qkv::tasks
