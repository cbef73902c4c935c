// ViT training-step benchmark (paper Table 2's smallest scale): ms per training step (forward,
// backward, AdamW) of a ViT with d_model 64, 4 layers, 4 heads, patch 7 on 28x28 inputs, batch
// 128, in qkvlab and in its peers (bench/torch_runner.h: PyTorch eager, torch.compile, JAX), all
// taking turns in one run (bench/torch_session.h), with each peer's median over qkvlab's.
// With --data DIR (the folder holding mnist/), also one epoch of that model on MNIST through
// the image loader, reporting the fraction of step time spent waiting for batches.
//
//   bench_vit [--steps N] [--rounds R] [--variant QKV] [--data DIR] [--peers LIST] [--no-torch]
#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <omp.h>
#include <vector>

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
  CLI::App app{"qkvlab ViT training-step benchmark (qkvlab vs its peers in one run)"};
  int steps = 20, rounds = 10;  // many short turns: the noise of a shared machine hits both alike
  std::string variant = "QKV", data, peer_list = "default";
  bool no_torch = false;
  app.add_option("--steps", steps, "timed steps (median reported)")->check(CLI::Range(1, 1000));
  app.add_option("--rounds", rounds, "turns the steps are split into")->check(CLI::Range(1, 1000));
  app.add_option("--variant", variant, "projection sharing: " + nn::sharing_names());
  app.add_option("--data", data, "folder holding mnist/ for the loader epoch");
  app.add_option("--peers", peer_list, bench::peers_help());
  app.add_flag("--no-torch", no_torch, "no peers (--peers none)");
  CLI11_PARSE(app, argc, argv);
  try {
    const std::vector<bench::Peer> peers = bench::parse_peers(no_torch ? "none" : peer_list);
    std::printf("ViT training step: d_model 64, 4 layers, 4 heads, patch 7, 28x28, batch 128, %s, %d threads\n",
                variant.c_str(), omp_get_max_threads());
    bench::print_step_peers(peers);
    std::printf("\n");
    auto ours = std::make_shared<ViTStep>(variant);
    std::vector<bench::Contestant> contestants{bench::timed([ours] { ours->run(); })};
    const auto twins =
        bench::add_step_twins(peers,
                              cat("vit --d-model 64 --layers 4 --heads 4 --patch 7 --image 28 --batch 128 --warmup 3",
                                  bench::torch_slots(nn::parse_sharing(variant))),
                              contestants);
    const auto times = bench::take_turns(contestants, steps, rounds);
    const double mine = bench::median_of(times[0]);
    bench::print_contestant_header();
    bench::print_contestant("qkvlab", "fp32", times[0], -1, cat(std::lround(128e3 / mine), " images/s"));
    for (size_t i = 0; i < twins.size(); ++i)
      bench::print_contestant(twins[i]->name(), "fp32", times[1 + i], mine, twins[i]->note());
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
