#include "lab/tasks/vision.h"

#include "lab/experiment/models.h"
#include "lab/tasks/common.h"
#include "lab/tasks/vision_data.h"
#include "train/data/loader_batches.h"

namespace qkv::tasks {

VisionInputs vision_inputs(const experiment::VisionConfig& c, const data::ImageDataset& train) {
  VisionInputs in;
  in.geometry = experiment::vision_geometry(c, train.height(), train.width());
  std::tie(in.eval.mean, in.eval.std) = data::channel_stats(train);
  in.eval.batch_size = c.train.eval_batch_size;
  in.eval.shuffle = false;
  in.eval.workers = c.data.workers;
  in.eval.image_size = c.data.image_size;
  in.eval.pad_height = in.geometry.padded_height;
  in.eval.pad_width = in.geometry.padded_width;
  return in;
}

nn::ViTConfig vit_of(const experiment::VisionConfig& c, const nn::Variant& variant, const VisionInputs& in,
                     const data::ImageDataset& train) {
  return experiment::vit_config(c, variant, in.geometry.padded_height, in.geometry.padded_width, train.channels(),
                                train.classes());
}

experiment::ResultRow run_vision(const experiment::Run& run, const experiment::RunDir& dir, dist::Communicator* comm) {
  const auto& c = run.config.as<experiment::VisionConfig>();
  const Device device = prepare_device(c.train, comm);
  const VisionSplits data = load_vision_splits(c);
  const VisionInputs in = vision_inputs(c, *data.train);
  data::LoaderOptions eval_opts = in.eval;
  eval_opts.seed = uint64_t(run.seed);
  eval_opts.shard = dist::shard_of(comm);
  data::LoaderOptions train_opts = eval_opts;  // and augmented, shuffled per epoch
  train_opts.batch_size = c.train.batch_size;
  train_opts.shuffle = true;
  train_opts.crop_padding = c.data.crop_padding;
  train_opts.horizontal_flip = c.data.flip;
  data::LoaderBatches train(data.train, train_opts, device), val(data.val, eval_opts, device),
      test(data.test, eval_opts, device);

  Generator gen(uint64_t(run.seed));
  nn::ViT model(vit_of(c, run.variant, in, *data.train), &gen);
  model.to(device);
  dropout_per_rank(gen, comm);
  const loops::TrainResult r = train_epochs({run, dir, model, [&](const Tensor& x) { return model.forward(x); },
                                             c.optim, c.schedule, c.train, comm},
                                            train, val, test);
  experiment::ResultRow row =
      classification_row(run, std::string(experiment::enum_name(c.data.dataset)), model.num_parameters(), r);
  row.images = experiment::ImageCounts{data.train->size(), data.test->size()};
  if (dist::is_writer(comm)) dir.write_result(row);
  return row;
}

}  // namespace qkv::tasks
