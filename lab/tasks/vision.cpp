#include "lab/tasks/vision.h"

#include "train/data/loader_batches.h"
#include "lab/tasks/common.h"
#include "lab/tasks/vision_data.h"

namespace qkv::tasks {

using experiment::Config;

nn::ViTConfig vit_config(const Config& c, int64_t height, int64_t width, int64_t channels, int64_t classes) {
  nn::ViTConfig v;
  v.image_height = height;
  v.image_width = width;
  v.channels = channels;
  v.patch = c.model.patch;
  v.classes = classes;
  v.layers = c.model.layers;
  v.mlp_ratio = c.model.ffn_mult;
  v.dropout = c.model.dropout;
  v.activation = activation(c.model);
  v.attention = attention_config(c.model);
  check<ValueError>(height % v.patch == 0 && width % v.patch == 0, "model.patch: ", v.patch, " does not divide the ",
                    height, "x", width, " images of ", experiment::enum_name(c.data.dataset));
  return v;
}

nlohmann::json run_vision(const experiment::Run& run, const experiment::RunDir& dir) {
  const Config& c = run.config;
  const Device device = prepare_device(c);
  const VisionSplits data = load_vision_splits(c.data, uint64_t(c.task.data_seed));
  const auto [mean, std] = data::channel_stats(*data.train);

  data::LoaderOptions train_opts;
  train_opts.batch_size = c.train.batch_size;
  train_opts.seed = uint64_t(run.seed);
  train_opts.workers = c.data.workers;
  train_opts.mean = mean;
  train_opts.std = std;
  train_opts.crop_padding = c.data.crop_padding;
  train_opts.horizontal_flip = c.data.flip;
  data::LoaderOptions eval_opts = train_opts;
  eval_opts.batch_size = c.train.eval_batch_size;
  eval_opts.shuffle = false;
  eval_opts.crop_padding = 0;
  eval_opts.horizontal_flip = false;
  data::LoaderBatches train(data.train, train_opts, device), val(data.val, eval_opts, device), test(data.test, eval_opts, device);

  Generator gen(uint64_t(run.seed));
  nn::ViT model(vit_config(c, data.train->height(), data.train->width(), data.train->channels(), data.train->classes()),
                &gen);
  model.to(device);
  auto optimizer = make_optimizer(c.optim, model.named_parameters());
  auto schedule = make_schedule(c, train.batches_per_epoch());
  auto forward = [&](const Tensor& images) { return model.forward(images); };
  const loops::TrainResult r = loops::fit(model, forward, *optimizer, *schedule, train, val, test, train_options(run, dir));
  const nlohmann::json result =
      result_row(run, std::string(experiment::enum_name(c.data.dataset)), model.num_parameters(), r,
                 {{"train_examples", data.train->size()}, {"test_examples", data.test->size()}});
  dir.write_result(result);
  return result;
}

}  // namespace qkv::tasks
