// ViT training-step benchmark (paper Table 2's smallest scale): images per second of a training
// step (forward, backward, AdamW) of a ViT with d_model 64, 4 layers, 4 heads, patch 7 on 28x28
// inputs, batch 128, in qkvlab and — when installed — the same model in PyTorch, in one run.
// With --data DIR (the folder holding mnist/), also one epoch of that model on MNIST through
// the image loader, reporting the fraction of step time spent waiting for batches.
//
//   bench_vit [--steps N] [--variant QKV] [--data DIR] [--no-torch]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <omp.h>

#include "bench/torch_runner.h"
#include "nn/models/vit.h"
#include "train/data/image_loader.h"
#include "train/optim/adam.h"

using namespace qkv;

namespace {

nn::ViTConfig vit(const std::string& variant) {
  nn::ViTConfig c;
  c.image_height = c.image_width = 28;
  c.channels = 1;
  c.patch = 7;
  c.layers = 4;
  c.attention.d_model = 64;
  c.attention.heads = 4;
  c.attention.sharing = nn::parse_sharing(variant);
  return c;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median ms of a synthetic-batch training step.
double step_ms(const std::string& variant, int steps) {
  Generator gen(0);
  nn::ViT model(vit(variant), &gen);
  optim::AdamW opt(model.named_parameters(), {});
  Tensor x = randn({128, 1, 28, 28}, {}, &gen);
  Tensor y = cast(uniform({128}, 0, 10, DType::f64, &gen), DType::i64);
  std::vector<double> t;
  for (int i = 0; i < steps + 3; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    Tensor loss = cross_entropy(model.forward(x), y);
    opt.zero_grad();
    loss.backward();
    opt.step();
    if (i >= 3) t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return median(t);
}

// One MNIST epoch through the loader: total seconds and seconds spent waiting for batches.
std::pair<double, double> mnist_epoch(const std::string& variant, const std::string& data) {
  auto train = data::load_idx_dataset(data + "/mnist", data::Split::train, "mnist");
  auto [mean, std] = data::channel_stats(*train);
  data::LoaderOptions o;
  o.batch_size = 128;
  o.mean = mean;
  o.std = std;
  data::ImageLoader loader(train, o);
  Generator gen(0);
  nn::ViT model(vit(variant), &gen);
  optim::AdamW opt(model.named_parameters(), {});
  loader.start_epoch(0);
  const auto t0 = std::chrono::steady_clock::now();
  data::ImageBatch b;
  while (loader.next(b)) {
    Tensor loss = cross_entropy(model.forward(b.images), b.labels);
    opt.zero_grad();
    loss.backward();
    opt.step();
  }
  return {std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), loader.wait_seconds()};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"qkvlab ViT training-step benchmark (qkvlab vs PyTorch in one run)"};
  int steps = 10;
  std::string variant = "QKV", data;
  bool no_torch = false;
  app.add_option("--steps", steps, "timed steps (median reported)")->check(CLI::Range(1, 1000));
  app.add_option("--variant", variant, "projection sharing: " + nn::sharing_names());
  app.add_option("--data", data, "folder holding mnist/ for the loader epoch");
  app.add_flag("--no-torch", no_torch, "skip the PyTorch comparison");
  CLI11_PARSE(app, argc, argv);
  try {
    std::printf("ViT training step: d_model 64, 4 layers, 4 heads, patch 7, 28x28, batch 128, %s, %d threads\n",
                variant.c_str(), omp_get_max_threads());
    const double ours = step_ms(variant, steps);
    const bench::TorchTiming torch =
        no_torch ? bench::TorchTiming{-1, "skipped"}
                 : bench::time_torch_step(cat("vit --d-model 64 --layers 4 --heads 4 --patch 7 --image 28 --batch 128 "
                                              "--steps ",
                                              std::max(3, steps / 2), bench::torch_slots(nn::parse_sharing(variant))));
    std::printf("qkvlab   %8.1f ms/step %8.0f images/s\n", ours, 128e3 / ours);
    if (torch.ms > 0)
      std::printf("PyTorch  %8.1f ms/step %8.0f images/s   speedup %.2fx  (%s)\n", torch.ms, 128e3 / torch.ms,
                  torch.ms / ours, torch.note.c_str());
    else std::printf("PyTorch  - (%s)\n", torch.note.c_str());
    if (!data.empty()) {
      const auto [seconds, wait] = mnist_epoch(variant, data);
      std::printf("MNIST epoch through the loader: %.1f s, %.1f%% of it waiting for batches\n", seconds,
                  100 * wait / seconds);
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_vit: %s\n", e.what());
    return 1;
  }
  return 0;
}
