// Training-step benchmark of the synthetic-task encoder: ms per step (forward, backward, AdamW)
// in qkvlab and, when PyTorch is installed, the same model in PyTorch (bench/torch_step.py)
// timed in the same run, with the ratio.
//
//   bench_encoder [--steps N] [--variant QKV] [--d-model 64|256] [--no-torch]
// Configurations: d_model 64, 2 layers, 4 heads, length 64, batch 128 (the paper's smallest
// scale), and d_model 256, length 128.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <omp.h>

#include "bench/torch_runner.h"
#include "nn/models/encoder.h"
#include "train/optim/adam.h"

using namespace qkv;

namespace {

struct Shape4 {
  int64_t d_model, length;
};

double qkvlab_ms(const Shape4& s, const std::string& variant, int steps) {
  nn::EncoderConfig c;
  c.attention.d_model = s.d_model;
  c.attention.heads = 4;
  c.attention.sharing = nn::parse_sharing(variant);
  c.layers = 2;
  c.ffn_hidden = 2 * s.d_model;
  Generator gen(0);
  nn::Encoder model(c, &gen);
  optim::AdamW opt(model.named_parameters(), {});
  const int64_t B = 128;
  Tensor ids = cast(uniform({B, s.length}, 0, 10, DType::f64, &gen), DType::i64);
  Tensor targets = cast(uniform({B, s.length}, 0, 10, DType::f64, &gen), DType::i64);
  auto step = [&] {
    Tensor loss = cross_entropy(model.forward(ids).reshape({-1, 10}), targets.reshape({-1}));
    opt.zero_grad();
    loss.backward();
    opt.step();
  };
  for (int i = 0; i < 3; ++i) step();
  std::vector<double> t;
  for (int i = 0; i < steps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    step();
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"qkvlab encoder training-step benchmark (qkvlab vs PyTorch in one run)"};
  int steps = 10;
  std::string variant = "QKV";
  bool no_torch = false;
  int64_t only = 0;
  app.add_option("--d-model", only, "run only this configuration (64 or 256; default both)");
  app.add_option("--steps", steps, "timed steps (median reported)")->check(CLI::Range(1, 1000));
  app.add_option("--variant", variant, "projection sharing: " + nn::sharing_names());
  app.add_flag("--no-torch", no_torch, "skip the PyTorch comparison");
  CLI11_PARSE(app, argc, argv);
  try {
    std::printf("encoder training step (forward + backward + AdamW), batch 128, 2 layers, 4 heads, %s, %d threads\n",
                variant.c_str(), omp_get_max_threads());
    std::printf("%8s %7s %12s %12s %9s\n", "d_model", "length", "qkvlab ms", "PyTorch ms", "speedup");
    for (const Shape4& s : {Shape4{64, 64}, Shape4{256, 128}}) {
      if (only != 0 && s.d_model != only) continue;
      const double ours = qkvlab_ms(s, variant, steps);
      const bench::TorchTiming torch =
          no_torch ? bench::TorchTiming{-1, "skipped"}
                   : bench::time_torch_step(cat("encoder --d-model ", s.d_model, " --length ", s.length,
                                                " --batch 128 --layers 2 --heads 4 --steps ", std::max(3, steps / 2),
                                                bench::torch_slots(nn::parse_sharing(variant))));
      const double theirs = torch.ms;
      const std::string& note = torch.note;
      if (theirs > 0)
        std::printf("%8lld %7lld %12.1f %12.1f %8.2fx\n", (long long)s.d_model, (long long)s.length, ours, theirs,
                    theirs / ours);
      else
        std::printf("%8lld %7lld %12.1f %12s %9s  (%s)\n", (long long)s.d_model, (long long)s.length, ours, "-", "-",
                    note.c_str());
      if (!note.empty() && theirs > 0 && s.d_model == 64) std::printf("         (%s)\n", note.c_str());
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_encoder: %s\n", e.what());
    return 1;
  }
  return 0;
}
