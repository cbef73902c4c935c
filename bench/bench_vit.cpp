// ViT training-step benchmark (paper Table 2's smallest scale): images per second of a training
// step (forward, backward, AdamW) of a ViT with d_model 64, 4 layers, 4 heads, patch 7 on 28x28
// inputs, batch 128, in qkvlab and — when installed — the same model in PyTorch, the two taking
// turns in one run (bench/torch_session.h).
// With --data DIR (the folder holding mnist/), also one epoch of that model on MNIST through
// the image loader, reporting the fraction of step time spent waiting for batches.
//
//   bench_vit [--steps N] [--rounds R] [--variant QKV] [--data DIR] [--no-torch]
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <memory>
#include <omp.h>

#include "bench/torch_runner.h"
#include "bench/torch_session.h"
#include "nn/models/vit.h"
#include "train/data/image/image_loader.h"
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

// The ViT, its optimizer and a random batch, warmed up by three steps.
struct ViTStep {
  Generator gen{0};
  nn::ViT model;
  optim::AdamW opt;
  Tensor x, y;
  explicit ViTStep(const std::string& variant) : model(vit(variant), &gen), opt(model.named_parameters(), {}) {
    x = randn({128, 1, 28, 28}, {}, &gen);
    y = cast(uniform({128}, 0, 10, DType::f64, &gen), DType::i64);
    for (int i = 0; i < 3; ++i) run();
  }
  void run() {
    Tensor loss = cross_entropy(model.forward(x), y);
    opt.zero_grad();
    loss.backward();
    opt.step();
  }
};

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
  int steps = 20, rounds = 10;  // many short turns: the noise of a shared machine hits both alike
  std::string variant = "QKV", data;
  bool no_torch = false;
  app.add_option("--steps", steps, "timed steps (median reported)")->check(CLI::Range(1, 1000));
  app.add_option("--rounds", rounds, "turns the steps are split into")->check(CLI::Range(1, 1000));
  app.add_option("--variant", variant, "projection sharing: " + nn::sharing_names());
  app.add_option("--data", data, "folder holding mnist/ for the loader epoch");
  app.add_flag("--no-torch", no_torch, "skip the PyTorch comparison");
  CLI11_PARSE(app, argc, argv);
  try {
    std::printf("ViT training step: d_model 64, 4 layers, 4 heads, patch 7, 28x28, batch 128, %s, %d threads\n",
                variant.c_str(), omp_get_max_threads());
    auto ours = std::make_shared<ViTStep>(variant);
    std::vector<bench::Contestant> contestants{bench::timed([ours] { ours->run(); })};
    std::unique_ptr<bench::TorchSession> torch;
    if (!no_torch) {
      torch = std::make_unique<bench::TorchSession>(
          cat("vit --d-model 64 --layers 4 --heads 4 --patch 7 --image 28 --batch 128 --warmup 3",
              bench::torch_slots(nn::parse_sharing(variant))));
      contestants.push_back(bench::contestant(*torch));
    }
    const auto times = bench::take_turns(contestants, steps, rounds);
    const double mine = bench::median_of(times[0]), theirs = torch ? bench::median_of(times[1]) : -1;
    std::printf("qkvlab   %8.1f ms/step %8.0f images/s\n", mine, 128e3 / mine);
    if (theirs > 0)
      std::printf("PyTorch  %8.1f ms/step %8.0f images/s   speedup %.2fx  (%s)\n", theirs, 128e3 / theirs,
                  theirs / mine, torch->note().c_str());
    else std::printf("PyTorch  - (%s)\n", torch ? torch->note().c_str() : "skipped");
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
