#include "lab/tasks/vision.h"

#include "lab/experiment/models.h"
#include "lab/tasks/common.h"
#include "lab/tasks/vision_data.h"
#include "train/data/loader_batches.h"

namespace qkv::tasks {

experiment::ResultRow run_vision(const experiment::Run& run, const experiment::RunDir& dir, dist::Communicator* comm) {
  const auto& c = run.config.as<experiment::VisionConfig>();
  const Device device = prepare_device(c.train, comm);
  const VisionSplits data = load_vision_splits(c);
  const data::ImageDataset& images = *data.train;
  // Resized to data.image_size, padded to data.pad_to or the patch: what the ViT sees.
  const experiment::ImageGeometry g = experiment::vision_geometry(c, images.height(), images.width());
  const auto [mean, std] = data::channel_stats(images);

  data::LoaderOptions train_opts;
  train_opts.batch_size = c.train.batch_size;
  train_opts.seed = uint64_t(run.seed);
  train_opts.workers = c.data.workers;
  train_opts.mean = mean;
  train_opts.std = std;
  train_opts.crop_padding = c.data.crop_padding;
  train_opts.horizontal_flip = c.data.flip;
  train_opts.image_size = c.data.image_size;
  train_opts.pad_height = g.padded_height;
  train_opts.pad_width = g.padded_width;
  train_opts.shard = dist::shard_of(comm);
  data::LoaderOptions eval_opts = train_opts;
  eval_opts.batch_size = c.train.eval_batch_size;
  eval_opts.shuffle = false;
  eval_opts.crop_padding = 0;
  eval_opts.horizontal_flip = false;
  data::LoaderBatches train(data.train, train_opts, device), val(data.val, eval_opts, device),
      test(data.test, eval_opts, device);

  Generator gen(uint64_t(run.seed));
  nn::ViT model(experiment::vit_config(c, run.variant, g.padded_height, g.padded_width, images.channels(),
                                       images.classes()),
                &gen);
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
