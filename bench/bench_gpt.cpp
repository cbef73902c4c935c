// GPT training-step benchmark at GPT-2 124M shapes (12 layers, d_model 768, 12 heads, vocab
// 50257, 1024 positions, dropout 0): ms per step (forward, cross-entropy, backward, AdamW step,
// zero_grad) of nn::GPT in qkvlab and, when installed, of the same model in PyTorch
// (bench/torch_gpt_step.py) in the same run, with the ratio; qkvlab's achieved GFLOP/s against
// the machine's float32 GEMM peak, measured in this run through qkvlab's matmul.
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

#include "nn/models/gpt.h"
#include "train/experiment/variant.h"
#include "train/optim/adam.h"

using namespace qkv;

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

nn::GPTConfig gpt_config(const std::string& variant_name, int64_t vocab) {
  const auto v = train::experiment::parse_variant(variant_name);
  check<ValueError>(!v.pos2d, "bench_gpt: ", v.name, " adds 2D positional scores, which are for non-causal tasks");
  nn::GPTConfig c;
  c.vocab = vocab;
  c.context = 1024;
  c.layers = 12;
  c.dropout = 0.0;
  c.attention.d_model = 768;
  c.attention.heads = 12;
  c.attention.kv_heads = v.kv_groups;
  c.attention.sharing = nn::parse_sharing(v.sharing);
  return c;
}

// Best GFLOP/s of an n^3 float32 matmul through qkvlab's matmul op.
double gemm_peak_gflops(int64_t n, int reps) {
  Generator gen(1);
  Tensor a = randn({n, n}, {}, &gen), b = randn({n, n}, {}, &gen);
  matmul(a, b);   // warm-up: allocator, threads
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = Clock::now();
    Tensor c = matmul(a, b);
    best = std::min(best, ms_since(t0));
  }
  return 2.0 * double(n) * double(n) * double(n) / (best * 1e6);
}

// Median ms of a training step of the GPT on random tokens.
double qkvlab_step_ms(const nn::GPTConfig& c, int64_t B, int64_t T, int steps) {
  Generator gen(0);
  nn::GPT model(c, &gen);
  train::AdamW opt(model.named_parameters(), {.lr = 1e-4});
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
  return median(t);
}

struct TorchResult {
  double ms = -1;     // negative: not measured
  std::string note;   // "PyTorch 1.13.0, 2 threads", or why it did not run
};

// Runs bench/torch_gpt_step.py (next to this file) with Debian's /usr/bin/python3.
TorchResult torch_step_ms(const std::string& args) {
  const auto script = std::filesystem::path(__FILE__).parent_path() / "torch_gpt_step.py";
  const std::string cmd = cat("/usr/bin/python3 ", script.string(), " ", args, " --threads ", omp_get_max_threads(),
                              " 2>/dev/null");
  TorchResult r;
  std::FILE* p = popen(cmd.c_str(), "r");
  if (!p) return {-1, "cannot start /usr/bin/python3"};
  std::string out;
  char buf[512];
  while (std::fgets(buf, sizeof buf, p)) out += buf;
  const int rc = pclose(p);
  try {
    const auto j = nlohmann::json::parse(out);
    if (rc != 0 || !j.contains("ms_per_step")) return {-1, j.value("error", "PyTorch run failed")};
    r.ms = j["ms_per_step"].get<double>();
    r.note = cat("PyTorch ", j["torch"].get<std::string>(), ", ", j["threads"].get<int>(), " threads, ",
                 j["parameters"].get<int64_t>(), " parameters");
  } catch (const std::exception&) {
    r.note = "PyTorch not available (/usr/bin/python3 with python3-torch)";
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"qkvlab GPT training-step benchmark at GPT-2 124M shapes (qkvlab vs PyTorch in one run)"};
  int steps = 5;
  std::string variant = "QKV";
  int64_t batch = 4, seq = 64, vocab = 50257;
  bool no_torch = false;
  app.add_option("--steps", steps, "timed steps (median reported)")->check(CLI::Range(1, 1000));
  app.add_option("--variant", variant, "attention variant: QKV, Q=K-V, Q-K=V, Q=K=V, GQA-g, MQA, Q-GQA-g, Q-MQA");
  app.add_option("--batch", batch, "sequences per step")->check(CLI::Range(1, 4096));
  app.add_option("--seq", seq, "tokens per sequence (at most the 1024 positions)")->check(CLI::Range(1, 1024));
  app.add_option("--vocab", vocab, "vocabulary (GPT-2: 50257; 50304 is its multiple of 64)")->check(CLI::Range(2, 1 << 20));
  app.add_flag("--no-torch", no_torch, "skip the PyTorch comparison");
  CLI11_PARSE(app, argc, argv);
  try {
    const nn::GPTConfig c = gpt_config(variant, vocab);
    const auto v = train::experiment::parse_variant(variant);
    const int64_t params = nn::gpt_parameter_count(c), tokens = batch * seq;
    // FLOPs per step: 6 N tokens (forward 2 N + backward 4 N per token, N = parameters with the
    // tied embedding once) plus the attention scores and mixing, 12 L T^2 d per sequence.
    const double flops = 6.0 * double(params) * double(tokens) +
                         12.0 * double(c.layers) * double(seq) * double(seq) * double(c.d_model()) * double(batch);
    std::printf("GPT training step (forward + backward + AdamW + zero_grad): %lld layers, d_model %lld, %lld heads, "
                "vocab %lld, %s, %lld parameters, batch %lld x %lld tokens, %d threads\n",
                (long long)c.layers, (long long)c.d_model(), (long long)c.attention.heads, (long long)c.vocab,
                v.name.c_str(), (long long)params, (long long)batch, (long long)seq, omp_get_max_threads());
    const double peak = gemm_peak_gflops(2048, 3);
    const double ours = qkvlab_step_ms(c, batch, seq, steps);
    const TorchResult torch =
        no_torch ? TorchResult{-1, "skipped"}
                 : torch_step_ms(cat("--vocab ", c.vocab, " --context ", c.context, " --layers ", c.layers,
                                     " --d-model ", c.d_model(), " --heads ", c.attention.heads, " --kv-heads ",
                                     c.attention.kv_heads, " --sharing ", v.sharing, " --batch ", batch, " --seq ", seq,
                                     " --steps ", std::max(3, steps / 2)));
    const double gflops = flops / (ours * 1e6);
    std::printf("qkvlab   %10.1f ms/step\n", ours);
    if (torch.ms > 0)
      std::printf("PyTorch  %10.1f ms/step   (%s)\nspeedup  %10.2fx  (PyTorch ms / qkvlab ms)\n", torch.ms,
                  torch.note.c_str(), torch.ms / ours);
    else
      std::printf("PyTorch  %10s           (%s)\n", "-", torch.note.c_str());
    std::printf("FLOPs/step %.3g = 6 x params x tokens + 12 x layers x seq^2 x d_model x batch\n", flops);
    std::printf("qkvlab   %10.1f GFLOP/s = %.0f%% of the measured float32 GEMM peak %.1f GFLOP/s "
                "(2048^3 matmul, best of 3)\n",
                gflops, 100.0 * gflops / peak, peak);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_gpt: %s\n", e.what());
    return 1;
  }
  return 0;
}
