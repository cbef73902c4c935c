#include "lab/tasks/anomaly.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "autograd/preflight.h"
#include "lab/experiment/models.h"
#include "lab/tasks/common.h"
#include "lab/tasks/vision_data.h"
#include "nn/models/resnet.h"
#include "tensor/safetensors.h"
#include "train/data/shuffle.h"

namespace qkv::tasks {

namespace fs = std::filesystem;
using experiment::AnomalyConfig;

data::LabelledFeatures resnet_features(const data::ImageDataset& data, const std::string& weights,
                                       const Device& device) {
  Generator gen(0);
  nn::ResNet34 net(1000, &gen);
  if (!weights.empty()) net.load(weights);
  net.to(device);
  net.eval();
  const int64_t H = data.height(), W = data.width(), C = data.channels(), N = data.size(), batch = 128;
  const float mean[3] = {0.485f, 0.456f, 0.406f}, stdev[3] = {0.229f, 0.224f, 0.225f};
  std::vector<Tensor> chunks;
  std::vector<int64_t> labels(static_cast<size_t>(N));
  std::vector<uint8_t> pixels(static_cast<size_t>(H * W * C));
  NoGradGuard no_grad;
  autograd::require_kernels(autograd::trace_ops([&] {
                              net.features(empty({1, 3, H, W}, {DType::f32, device}));
                            }),
                            {}, device, cat("train.device ", device, " (ResNet34 features)"));
  for (int64_t b = 0; b < N; b += batch) {
    const int64_t n = std::min(batch, N - b);
    Tensor images = empty({n, 3, H, W});
    float* p = images.data<float>();
    for (int64_t i = 0; i < n; ++i) {
      data.read(b + i, pixels.data());
      labels[size_t(b + i)] = data.label(b + i);
      for (int64_t c = 0; c < 3; ++c)
        for (int64_t y = 0; y < H; ++y)
          for (int64_t x = 0; x < W; ++x) {
            const float v = float(pixels[size_t((y * W + x) * C + (C == 3 ? c : 0))]) / 255.0f;
            p[((i * 3 + c) * H + y) * W + x] = (v - mean[c]) / stdev[c];
          }
    }
    chunks.push_back(net.features(images.to(device)));  // read once, after the last batch
    std::printf("\r%s: ResNet34 features %lld/%lld", data.name().c_str(), (long long)(b + n), (long long)N);
    std::fflush(stdout);
  }
  std::printf("\n");
  return {concat(chunks, 0).to(kCPU), from_vector(labels, {N})};
}

namespace {

// Features of one split: from the file, or ResNet34 features cached under cache_dir.
data::LabelledFeatures split_features(const AnomalyConfig& c, data::Split split, const fs::path& cache_dir,
                                      const Device& device) {
  const std::string part = split == data::Split::train ? "train" : "test";
  if (c.data.features == experiment::FeatureSource::file) {
    auto t = safetensors::load(c.data.features_file);
    for (const std::string& key : {part + ".features", part + ".labels"})
      check<IOError>(t.count(key) > 0, c.data.features_file, ": missing tensor '", key,
                     "' (expected train.features [N, F], train.labels [N], test.features, test.labels)");
    return {t.at(part + ".features").to(DType::f32), t.at(part + ".labels").to(DType::i64)};
  }
  const std::string weights_tag =
      c.data.resnet_weights.empty() ? "random" : fs::path(c.data.resnet_weights).stem().string();
  const fs::path cache =
      cache_dir / cat(experiment::enum_name(c.data.dataset), "-", part, "-resnet34-", weights_tag, ".safetensors");
  if (fs::exists(cache)) {
    auto t = safetensors::load(cache.string());
    return {t.at("features"), t.at("labels")};
  }
  const data::LabelledFeatures f = resnet_features(*load_dataset(c.data, split), c.data.resnet_weights, device);
  fs::create_directories(cache_dir);
  safetensors::save(cache.string(), {{"features", f.features}, {"labels", f.labels}},
                    {{"encoder", "resnet34"},
                     {"weights", c.data.resnet_weights.empty() ? "random init" : c.data.resnet_weights}});
  return f;
}

}  // namespace

experiment::ResultRow run_anomaly(const experiment::Run& run, const experiment::RunDir& dir,
                                  const fs::path& cache_dir) {
  const auto& c = run.config.as<AnomalyConfig>();
  const Device device = prepare_device(c.train);
  data::LabelledFeatures train = split_features(c, data::Split::train, cache_dir, device);
  data::LabelledFeatures test = split_features(c, data::Split::test, cache_dir, device);
  // Standardize each feature with the training statistics.
  const Tensor mu = mean(train.features, {0}, true);
  const Tensor sd = sqrt(mean(pow(train.features - mu, 2), {0}, true) + 1e-6);
  train.features = (train.features - mu) / sd;
  test.features = (test.features - mu) / sd;

  const int64_t N = train.features.size(0), holdout = std::min<int64_t>(c.data.holdout, N / 2);
  const std::vector<int64_t> order = data::philox_permutation(N, uint64_t(c.task.data_seed));
  const std::vector<int64_t> train_pool(order.begin() + holdout, order.end()),
      val_pool(order.begin(), order.begin() + holdout);
  std::vector<int64_t> test_pool(static_cast<size_t>(test.features.size(0)));
  for (size_t i = 0; i < test_pool.size(); ++i) test_pool[i] = int64_t(i);
  Generator sets(uint64_t(c.task.data_seed) + 17);
  const data::SetData tr = data::make_sets(train, train_pool, c.data.train_sets, c.data.set_size, sets);
  const data::SetData va = data::make_sets(train, val_pool, c.data.val_sets, c.data.set_size, sets);
  const data::SetData te = data::make_sets(test, test_pool, c.data.test_sets, c.data.set_size, sets);

  Generator gen(uint64_t(run.seed));
  nn::SetTransformer model(experiment::set_transformer_config(c, run.variant, train.features.size(1)), &gen);
  model.to(device);
  auto on = [&](const data::SetData& s) { return data::LabelledData{s.features.to(device), s.targets.to(device)}; };
  const loops::TrainResult r =
      train_epochs({run, dir, model, [&](const Tensor& x) { return model.forward(x); }, c.optim, c.schedule, c.train},
                   on(tr), on(va), on(te));
  experiment::ResultRow row = classification_row(run, "anomaly", model.num_parameters(), r);
  row.sets = experiment::SetSource{std::string(experiment::enum_name(c.data.dataset)),
                                   c.data.features == experiment::FeatureSource::file ? c.data.features_file
                                   : c.data.resnet_weights.empty()                    ? "resnet34 (random init)"
                                                                                      : c.data.resnet_weights,
                                   1.0 / double(c.data.set_size)};
  dir.write_result(row);
  return row;
}

}  // namespace qkv::tasks
