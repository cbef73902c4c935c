// GPT training-step benchmark at GPT-2 124M shapes (12 layers, d_model 768, 12 heads, vocab
// 50257, 1024 positions, dropout 0): ms per step (forward, cross-entropy, backward, AdamW step,
// zero_grad; median and best of --steps) of nn::GPT in qkvlab and, when installed, of the same
// model in PyTorch (bench/torch_step.py gpt) in the same run, with the ratio; qkvlab's achieved
// GFLOP/s (6 x parameters x tokens + 12 x layers x seq^2 x d_model per sequence) against the
// machine's float32 GEMM peak, measured in this run through qkvlab's matmul.
//
//   bench_gpt [--steps N] [--variant QKV|Q=K-V|Q-K=V|Q=K=V|GQA-g|MQA|Q-GQA-g|Q-MQA]
//             [--batch 4] [--seq 64] [--vocab 50257] [--no-torch]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <omp.h>

#include "bench/torch_runner.h"
#include "nn/models/gpt.h"
#include "nn/variant.h"
#include "train/loops/mfu.h"
#include "train/optim/adam.h"

using namespace qkv;

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

struct StepTime {
  double median_ms = -1, best_ms = -1;  // negative: not measured
};

nn::GPTConfig gpt_config(const std::string& variant_name, int64_t vocab) {
  const nn::Variant v = nn::parse_variant(variant_name);
  check<ValueError>(!v.pos2d, "bench_gpt: ", variant_name,
                    " adds 2D positional scores, which are for non-causal tasks");
  nn::GPTConfig c;
  c.vocab = vocab;
  c.context = 1024;
  c.layers = 12;
  c.dropout = 0.0;
  c.attention.d_model = 768;
  c.attention.heads = 12;
  c.attention.kv_heads = v.kv_heads;
  c.attention.sharing = v.sharing;
  return c;
}

// Median and best ms of a training step of the GPT on random tokens.
StepTime qkvlab_step_ms(const nn::GPTConfig& c, int64_t B, int64_t T, int steps) {
  Generator gen(0);
  nn::GPT model(c, &gen);
  optim::AdamW opt(model.named_parameters(), {.lr = 1e-4, .weight_decay = 0.01});  // torch.optim.AdamW's decay
  Tensor ids = cast(uniform({B, T}, 0, double(c.vocab), DType::f64, &gen), DType::i64);
  Tensor targets = cast(uniform({B, T}, 0, double(c.vocab), DType::f64, &gen), DType::i64);
  auto step = [&] {
    Tensor loss = model.loss(ids, targets);
    loss.backward();
    opt.step();
    opt.zero_grad();
  };
  for (int i = 0; i < 2; ++i) step();
  std::vector<double> t;
  for (int i = 0; i < steps; ++i) {
    const auto t0 = Clock::now();
    step();
    t.push_back(ms_since(t0));
  }
  std::sort(t.begin(), t.end());
  return {t[t.size() / 2], t[0]};
}

struct TorchResult {
  StepTime time;
  std::string note;  // "PyTorch 1.13.0, 2 threads, ... parameters", or why it did not run
};

// Runs bench/torch_step.py's GPT with Debian's /usr/bin/python3.
TorchResult torch_step_ms(const std::string& args) {
  TorchResult r;
  const auto j = bench::run_torch_script("torch_step.py", "gpt " + args, r.note);
  if (!j) return r;
  r.time = {(*j)["ms_per_step"].get<double>(), (*j)["best_ms"].get<double>()};
  r.note = cat("PyTorch ", (*j)["torch"].get<std::string>(), ", ", (*j)["threads"].get<int>(), " threads, ",
               (*j)["parameters"].get<int64_t>(), " parameters");
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"qkvlab GPT training-step benchmark at GPT-2 124M shapes (qkvlab vs PyTorch in one run)"};
  int steps = 5;
  std::string variant = "QKV";
  int64_t batch = 4, seq = 64, vocab = 50257;
  bool no_torch = false;
  app.add_option("--steps", steps, "timed steps of each (median and best reported)")->check(CLI::Range(1, 1000));
  app.add_option("--variant", variant, "attention variant: QKV, Q=K-V, Q-K=V, Q=K=V, GQA-g, MQA, Q-GQA-g, Q-MQA");
  app.add_option("--batch", batch, "sequences per step")->check(CLI::Range(1, 4096));
  app.add_option("--seq", seq, "tokens per sequence (at most the 1024 positions)")->check(CLI::Range(1, 1024));
  app.add_option("--vocab", vocab, "vocabulary (GPT-2: 50257; 50304 is its multiple of 64)")
      ->check(CLI::Range(2, 1 << 20));
  app.add_flag("--no-torch", no_torch, "skip the PyTorch comparison");
  CLI11_PARSE(app, argc, argv);
  try {
    const nn::GPTConfig c = gpt_config(variant, vocab);
    const nn::Variant v = nn::parse_variant(variant);
    const int64_t params = nn::gpt_parameter_count(c), tokens = batch * seq;
    // FLOPs per step: 6 N tokens (forward 2 N + backward 4 N per token, N = parameters with the
    // tied embedding once) plus the attention scores and mixing, 12 L T^2 d per sequence.
    const double flops = 6.0 * double(params) * double(tokens) +
                         12.0 * double(c.layers) * double(seq) * double(seq) * double(c.d_model()) * double(batch);
    std::printf(
        "GPT training step (forward + backward + AdamW + zero_grad): %lld layers, d_model %lld, %lld heads, "
        "vocab %lld, %s, %lld parameters, batch %lld x %lld tokens, %d threads\n",
        (long long)c.layers, (long long)c.d_model(), (long long)c.attention.heads, (long long)c.vocab,
        nn::variant_name(v).c_str(), (long long)params, (long long)batch, (long long)seq, omp_get_max_threads());
    const double peak = loops::measure_gemm_flops(kCPU, 2048, 3) / 1e9;
    const StepTime ours = qkvlab_step_ms(c, batch, seq, steps);
    const TorchResult torch =
        no_torch ? TorchResult{{}, "skipped"}
                 : torch_step_ms(cat("--vocab ", c.vocab, " --context ", c.context, " --layers ", c.layers,
                                     " --d-model ", c.d_model(), " --heads ", c.attention.heads, " --kv-heads ",
                                     c.attention.kv_heads, bench::torch_slots(v.sharing), " --batch ", batch,
                                     " --length ", seq, " --steps ", steps, " --warmup 2"));
    const double gflops = flops / (ours.median_ms * 1e6);
    std::printf("%-8s %12s %12s\n", "", "median ms", "best ms");
    std::printf("%-8s %12.1f %12.1f\n", "qkvlab", ours.median_ms, ours.best_ms);
    if (torch.time.median_ms > 0)
      std::printf("%-8s %12.1f %12.1f   (%s)\nspeedup  %11.2fx %11.2fx  (PyTorch ms / qkvlab ms)\n", "PyTorch",
                  torch.time.median_ms, torch.time.best_ms, torch.note.c_str(), torch.time.median_ms / ours.median_ms,
                  torch.time.best_ms / ours.best_ms);
    else std::printf("%-8s %12s %12s   (%s)\n", "PyTorch", "-", "-", torch.note.c_str());
    std::printf("FLOPs/step %.3g = 6 x params x tokens + 12 x layers x seq^2 x d_model x batch\n", flops);
    std::printf(
        "qkvlab   %.1f GFLOP/s at the median step = %.0f%% of the measured float32 GEMM peak %.1f GFLOP/s "
        "(2048^3 matmul, best of 3)\n",
        gflops, 100.0 * gflops / peak, peak);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_gpt: %s\n", e.what());
    return 1;
  }
  return 0;
}
