// Training-step benchmark of the synthetic-task encoder: ms per step (forward, backward, AdamW)
// in qkvlab and in its peers (bench/torch_runner.h: PyTorch eager, torch.compile, JAX), the same
// model in each (bench/torch_step.py, bench/peers/jax_step.py), all taking turns in the same run
// (bench/torch_session.h), with each peer's median over qkvlab's.
//
//   bench_encoder [--steps N] [--rounds R] [--variant QKV] [--d-model 64|256] [--peers LIST] [--no-torch]
// Configurations: d_model 64, 2 layers, 4 heads, length 64, batch 128 (the paper's smallest
// scale), and d_model 256, length 128.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <omp.h>
#include <vector>

#include "bench/torch_runner.h"
#include "bench/torch_session.h"
#include "nn/models/encoder.h"
#include "train/optim/adam.h"

using namespace qkv;

namespace {

struct Shape4 {
  int64_t d_model, length;
};

constexpr int64_t kBatch = 128, kClasses = 10;

// The encoder, its optimizer and a random batch, warmed up by three steps.
struct EncoderStep {
  Generator gen{0};
  nn::Encoder model;
  optim::AdamW opt;
  Tensor ids, targets;
  static nn::EncoderConfig config(const Shape4& s, const std::string& variant) {
    nn::EncoderConfig c;
    c.attention.d_model = s.d_model;
    c.attention.heads = 4;
    c.attention.sharing = nn::parse_sharing(variant);
    c.layers = 2;
    c.ffn_hidden = 2 * s.d_model;
    return c;
  }
  EncoderStep(const Shape4& s, const std::string& variant)
      : model(config(s, variant), &gen), opt(model.named_parameters(), {}) {
    ids = cast(uniform({kBatch, s.length}, 0, kClasses, DType::f64, &gen), DType::i64);
    targets = cast(uniform({kBatch, s.length}, 0, kClasses, DType::f64, &gen), DType::i64);
    for (int i = 0; i < 3; ++i) run();
  }
  void run() {
    Tensor loss = cross_entropy(model.forward(ids).reshape({-1, kClasses}), targets.reshape({-1}));
    opt.zero_grad();
    loss.backward();
    opt.step();
  }
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"qkvlab encoder training-step benchmark (qkvlab vs its peers in one run)"};
  int steps = 20, rounds = 10;  // many short turns: the noise of a shared machine hits both alike
  std::string variant = "QKV", peer_list = "default";
  bool no_torch = false;
  int64_t only = 0;
  app.add_option("--d-model", only, "run only this configuration (64 or 256; default both)");
  app.add_option("--steps", steps, "timed steps of each (median reported)")->check(CLI::Range(1, 1000));
  app.add_option("--rounds", rounds, "turns the steps are split into")->check(CLI::Range(1, 1000));
  app.add_option("--variant", variant, "projection sharing: " + nn::sharing_names());
  app.add_option("--peers", peer_list, bench::peers_help());
  app.add_flag("--no-torch", no_torch, "no peers (--peers none)");
  CLI11_PARSE(app, argc, argv);
  try {
    const std::vector<bench::Peer> peers = bench::parse_peers(no_torch ? "none" : peer_list);
    std::printf("encoder training step (forward + backward + AdamW), batch 128, 2 layers, 4 heads, %s, %d threads\n",
                variant.c_str(), omp_get_max_threads());
    bench::print_step_peers(peers);
    for (const Shape4& s : {Shape4{64, 64}, Shape4{256, 128}}) {
      if (only != 0 && s.d_model != only) continue;
      auto ours = std::make_shared<EncoderStep>(s, variant);
      std::vector<bench::Contestant> contestants{bench::timed([ours] { ours->run(); })};
      const auto twins =
          bench::add_step_twins(peers,
                                cat("encoder --d-model ", s.d_model, " --length ", s.length, " --batch ", kBatch,
                                    " --layers 2 --heads 4 --warmup 3", bench::torch_slots(nn::parse_sharing(variant))),
                                contestants);
      const auto times = bench::take_turns(contestants, steps, rounds);
      const double mine = bench::median_of(times[0]);
      std::printf("\nd_model %lld, length %lld\n", (long long)s.d_model, (long long)s.length);
      bench::print_contestant_header();
      bench::print_contestant("qkvlab", "fp32", times[0], -1, "");
      for (size_t i = 0; i < twins.size(); ++i)
        bench::print_contestant(twins[i]->name(), "fp32", times[1 + i], mine, twins[i]->note());
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_encoder: %s\n", e.what());
    return 1;
  }
  return 0;
}
