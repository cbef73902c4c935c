#include "lab/tasks/anomaly.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "autograd/preflight.h"
#include "io/safetensors.h"
#include "lab/experiment/models.h"
#include "lab/tasks/common.h"
#include "lab/tasks/vision_data.h"
#include "train/data/image/image_resize.h"
#include "train/data/shuffle.h"

namespace qkv::tasks {

namespace fs = std::filesystem;
using experiment::AnomalyConfig;

data::LabelledFeatures resnet_features(const nn::BasicResNet& net, const data::ImageDataset& data, int64_t image_size,
                                       const Device& device, int64_t batch) {
  check<ValueError>(image_size >= 0 && batch >= 0, "resnet_features: image_size and batch must be non-negative, got ",
                    image_size, " and ", batch);
  const int64_t H0 = data.height(), W0 = data.width(), C = data.channels(), N = data.size();
  check<ValueError>(C == 1 || C == 3, data.name(), ": ResNet34 features need 1 or 3 channels, got ", C);
  const int64_t H = image_size > 0 ? image_size : H0, W = image_size > 0 ? image_size : W0;
  if (batch == 0) batch = std::clamp<int64_t>(64 * 224 * 224 / (H * W), 1, 256);
  const float mean[3] = {0.485f, 0.456f, 0.406f}, stdev[3] = {0.229f, 0.224f, 0.225f};
  std::vector<Tensor> chunks;
  std::vector<int64_t> labels(static_cast<size_t>(N));
  std::vector<uint8_t> raw(static_cast<size_t>(H0 * W0 * C)), sized(static_cast<size_t>(H * W * C));
  NoGradGuard no_grad;
  autograd::require_kernels(autograd::trace_ops([&] {
                              net.features(empty({1, 3, H, W}, {DType::f32, device}));
                            }),
                            {}, device, cat("train.device ", device, " (ResNet34 features)"));
  const auto start = std::chrono::steady_clock::now();
  for (int64_t b = 0; b < N; b += batch) {
    const int64_t n = std::min(batch, N - b);
    Tensor images = empty({n, 3, H, W});
    float* p = images.data<float>();
    for (int64_t i = 0; i < n; ++i) {
      data.read(b + i, raw.data());
      labels[size_t(b + i)] = data.label(b + i);
      const uint8_t* px = raw.data();
      if (H != H0 || W != W0) {
        data::resize_bilinear(raw.data(), H0, W0, C, H, W, sized.data());
        px = sized.data();
      }
      for (int64_t c = 0; c < 3; ++c)
        for (int64_t y = 0; y < H; ++y)
          for (int64_t x = 0; x < W; ++x) {
            const float v = float(px[size_t((y * W + x) * C + (C == 3 ? c : 0))]) / 255.0f;
            p[((i * 3 + c) * H + y) * W + x] = (v - mean[c]) / stdev[c];
          }
    }
    chunks.push_back(net.features(images.to(device)));  // read once, after the last batch
    std::printf("\r%s: ResNet34 features %lld/%lld", data.name().c_str(), (long long)(b + n), (long long)N);
    std::fflush(stdout);
  }
  Tensor features = N > 0 ? concat(chunks, 0).to(kCPU) : empty({0, 512});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("\n%s: ResNet34 features of %lld images at %lldx%lld px in %.1f s (%.2f ms per image)\n",
              data.name().c_str(), (long long)N, (long long)H, (long long)W, seconds,
              N > 0 ? 1000.0 * seconds / double(N) : 0.0);
  return {features, from_vector(labels, {N})};
}

std::string file_digest(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  check<IOError>(bool(in), path, ": cannot open the file to digest it");
  std::vector<char> buf(size_t(1) << 20);
  uint64_t h = 0x9e3779b97f4a7c15ull, length = 0;
  while (in) {
    in.read(buf.data(), std::streamsize(buf.size()));
    const size_t got = size_t(in.gcount());
    std::fill(buf.begin() + std::ptrdiff_t(got), buf.begin() + std::ptrdiff_t((got + 7) / 8 * 8), 0);
    for (size_t i = 0; i < got; i += 8) {
      uint64_t w = 0;
      std::memcpy(&w, buf.data() + i, 8);
      h = data::mix64(h ^ w) + 0x632be59bd9b4e019ull;
    }
    length += got;
  }
  check<IOError>(in.eof(), path, ": read error while digesting the file");
  h = data::mix64(h ^ length);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", (unsigned long long)h);
  return hex;
}

std::string feature_cache_name(const std::string& dataset, const std::string& split, int64_t image_size,
                               const std::string& weights_path, const std::string& weights_digest) {
  std::string name = cat(dataset, "-", split, "-resnet34-");
  name += image_size > 0 ? cat(image_size, "px-") : std::string("nativepx-");
  name +=
      weights_path.empty() ? std::string("random") : cat(fs::path(weights_path).stem().string(), "-", weights_digest);
  return name + ".safetensors";
}

data::LabelledFeatures cached_features(const fs::path& cache, const std::function<data::LabelledFeatures()>& compute,
                                       std::map<std::string, std::string>& metadata, std::vector<std::string>& log,
                                       bool write) {
  std::string note;
  data::LabelledFeatures f;
  if (fs::exists(cache)) {
    safetensors::Metadata stored;
    auto t = safetensors::load(cache.string(), kCPU, &stored);
    const char* fix = " (delete the file to compute the features again)";
    for (const char* key : {"features", "labels"})
      check<IOError>(t.count(key) > 0, cache.string(), ": missing tensor '", key, "'", fix);
    f = {t.at("features"), t.at("labels")};
    check<IOError>(f.features.dim() == 2 && f.features.dtype() == DType::f32, cache.string(), ": tensor 'features' is ",
                   shape_str(f.features.shape()), " ", dtype_name(f.features.dtype()), ", expected [N, F] float32",
                   fix);
    check<IOError>(f.labels.dim() == 1 && f.labels.size(0) == f.features.size(0) && f.labels.dtype() == DType::i64,
                   cache.string(), ": tensor 'labels' is ", shape_str(f.labels.shape()), " ",
                   dtype_name(f.labels.dtype()), ", expected [", f.features.size(0), "] int64", fix);
    metadata = stored;
    note = cat("features: reused the cache ", cache.string());
  } else if (!write) {
    f = compute();
    note = "features: computed (rank 0 caches them)";
  } else {
    f = compute();
    fs::create_directories(cache.parent_path());
    safetensors::save(cache.string(), {{"features", f.features}, {"labels", f.labels}}, metadata);
    note = cat("features: computed and cached in ", cache.string());
  }
  std::printf("%s\n", note.c_str());
  log.push_back(note);
  return f;
}

namespace {

struct SplitFeatures {
  data::LabelledFeatures f;
  int64_t pixels = 0;  // side of the images the ResNet34 encoded; 0: features from a file
};

// Features of one split: from the file, or ResNet34 features cached under cache_dir.
SplitFeatures split_features(const AnomalyConfig& c, data::Split split, const fs::path& cache_dir,
                             const std::string& digest, const Device& device, std::vector<std::string>& log,
                             bool write) {
  const std::string part = split == data::Split::train ? "train" : "test";
  if (c.data.features == experiment::FeatureSource::file) {
    auto t = safetensors::load(c.data.features_file);
    for (const std::string& key : {part + ".features", part + ".labels"})
      check<IOError>(t.count(key) > 0, c.data.features_file, ": missing tensor '", key,
                     "' (expected train.features [N, F], train.labels [N], test.features, test.labels)");
    return {{t.at(part + ".features").to(DType::f32), t.at(part + ".labels").to(DType::i64)}, 0};
  }
  const std::string dataset(experiment::enum_name(c.data.dataset));
  const std::string& weights = c.data.resnet_weights;
  const fs::path cache = cache_dir / feature_cache_name(dataset, part, c.data.image_size, weights, digest);
  const int64_t pixels = c.data.image_size > 0 ? c.data.image_size : experiment::native_image_side(c.data.dataset);
  std::map<std::string, std::string> meta = {{"encoder", "resnet34"},
                                             {"weights", weights.empty() ? "random init" : weights},
                                             {"weights_digest", weights.empty() ? "none" : digest},
                                             {"dataset", cat(dataset, "/", part)},
                                             {"pixels", std::to_string(pixels)}};
  auto compute = [&] {
    const auto images = load_dataset(c.data, split);
    Generator gen(0);
    nn::ResNet34 net(1000, &gen);
    if (!weights.empty()) nn::load_torchvision_weights(net, weights);
    net.to(device);
    return resnet_features(net, *images, c.data.image_size, device);
  };
  return {cached_features(cache, compute, meta, log, write), pixels};
}

// Appends the feature notes to the run's train.log (the loop starts that file afresh).
void append_to_log(const fs::path& run_dir, const std::vector<std::string>& lines) {
  std::ofstream out(run_dir / "train.log", std::ios::app);
  for (const std::string& l : lines) out << l << "\n";
  check<IOError>(bool(out), (run_dir / "train.log").string(), ": cannot append the feature notes");
}

}  // namespace

AnomalySets anomaly_sets(const AnomalyConfig& c, const fs::path& cache_dir, const Device& device, bool write_cache) {
  const bool resnet = c.data.features == experiment::FeatureSource::resnet34;
  const std::string& weights = c.data.resnet_weights;
  check<IOError>(!resnet || weights.empty() || fs::is_regular_file(weights), "data.resnet_weights '", weights,
                 "': no such file (expected torchvision's resnet34 weights as safetensors, from "
                 "scripts/convert_resnet34.py)");
  const std::string digest = resnet && !weights.empty() ? file_digest(weights) : "";
  AnomalySets out;
  SplitFeatures train_split = split_features(c, data::Split::train, cache_dir, digest, device, out.notes, write_cache);
  SplitFeatures test_split = split_features(c, data::Split::test, cache_dir, digest, device, out.notes, write_cache);
  out.pixels = train_split.pixels;
  data::LabelledFeatures& train = train_split.f;
  data::LabelledFeatures& test = test_split.f;
  if (c.data.standardize) {  // each feature, with the training statistics
    const Tensor mu = mean(train.features, {0}, true);
    const Tensor sd = sqrt(mean(pow(train.features - mu, 2), {0}, true) + 1e-6);
    train.features = (train.features - mu) / sd;
    test.features = (test.features - mu) / sd;
  }

  // Validation sets come from held-out training images; testing the last epoch needs none.
  const bool validates = c.train.protocol != experiment::Protocol::all_last;
  const int64_t N = train.features.size(0), holdout = validates ? std::min<int64_t>(c.data.holdout, N / 2) : 0;
  const std::vector<int64_t> order = data::philox_permutation(N, uint64_t(c.task.data_seed));
  out.train_pool.assign(order.begin() + holdout, order.end());
  const std::vector<int64_t> val_pool(order.begin(), order.begin() + holdout);
  std::vector<int64_t> test_pool(static_cast<size_t>(test.features.size(0)));
  for (size_t i = 0; i < test_pool.size(); ++i) test_pool[i] = int64_t(i);
  Generator sets(uint64_t(c.task.data_seed) + 17);
  if (!c.data.resample) out.train = data::make_sets(train, out.train_pool, c.data.train_sets, c.data.set_size, sets);
  if (validates) out.val = data::make_sets(train, val_pool, c.data.val_sets, c.data.set_size, sets);
  out.test = data::make_sets(test, test_pool, c.data.test_sets, c.data.set_size, sets);
  out.train_features = std::move(train);
  return out;
}

experiment::ResultRow run_anomaly(const experiment::Run& run, const experiment::RunDir& dir, const fs::path& cache_dir,
                                  dist::Communicator* comm) {
  const auto& c = run.config.as<AnomalyConfig>();
  const Device device = prepare_device(c.train, comm);
  const bool writer = dist::is_writer(comm);
  const bool resnet = c.data.features == experiment::FeatureSource::resnet34;
  const AnomalySets data = anomaly_sets(c, cache_dir, device, writer);
  const data::SetData &tr = data.train, &va = data.val, &te = data.test;

  Generator gen(uint64_t(run.seed));
  nn::SetTransformer model(experiment::set_transformer_config(c, run.variant, data.train_features.features.size(1)),
                           &gen);
  model.to(device);
  dropout_per_rank(gen, comm);
  auto on = [&](const data::SetData& s) {
    return s.features.defined() ? data::LabelledData{s.features.to(device), s.targets.to(device)}
                                : data::LabelledData{};
  };
  const EpochRun epochs{run,     dir,        model,   [&](const Tensor& x) { return model.forward(x); },
                        c.optim, c.schedule, c.train, comm};
  loops::TrainResult r;
  if (c.data.resample) {  // new training sets every epoch, from the data seed
    const data::Shard shard = dist::shard_of(comm);
    data::ResampledSets tr_sets(data.train_features, data.train_pool, c.data.train_sets, c.data.set_size,
                                c.train.batch_size, uint64_t(c.task.data_seed) + 17, device, shard);
    data::TensorBatches va_sets(on(va), c.train.eval_batch_size, false, 0, shard),
        te_sets(on(te), c.train.eval_batch_size, false, 0, shard);
    r = train_epochs(epochs, tr_sets, va_sets, te_sets);
  } else {
    r = train_epochs(epochs, on(tr), on(va), on(te));
  }
  if (!writer) return classification_row(run, "anomaly", model.num_parameters(), r);
  append_to_log(dir.path(), data.notes);
  experiment::ResultRow row = classification_row(run, "anomaly", model.num_parameters(), r);
  row.sets = experiment::SetSource{std::string(experiment::enum_name(c.data.dataset)),
                                   !resnet                         ? c.data.features_file
                                   : c.data.resnet_weights.empty() ? "resnet34 (random init)"
                                                                   : c.data.resnet_weights,
                                   1.0 / double(c.data.set_size)};
  row.sets->image_size = data.pixels;
  if (resnet) row.sets->pretrained = !c.data.resnet_weights.empty();
  dir.write_result(row);
  return row;
}

}  // namespace qkv::tasks
