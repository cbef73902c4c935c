// GPT training-step benchmark at GPT-2 124M shapes (12 layers, d_model 768, 12 heads, vocab
// 50257, 1024 positions, dropout 0): ms per step (forward, cross-entropy, backward, AdamW step,
// zero_grad; median and best of --steps) of nn::GPT in qkvlab and of the same model in its peers
// (bench/torch_runner.h: PyTorch eager, torch.compile, JAX), all taking turns in the same run
// (bench/torch_session.h), with each peer's median over qkvlab's in the same precision (bf16:
// torch.autocast's; not JAX's, whose CPU backend computes bf16 dots in float32); qkvlab's achieved
// GFLOP/s (6 x parameters x tokens + 12 x layers x seq^2 x d_model per sequence) against the
// machine's float32 and bfloat16 GEMM peaks, measured through qkvlab's matmul (2048^3) in the
// same turns. Rate and peak are both bests of their turns: a shared host's noise only ever adds
// time (here it moved the same 2048^3 GEMM by 2x within one run), so a median peak understates
// the peak and flatters the share, and the bests compare the step's own speed with the GEMM's.
// The step runs in float32 and again as train.precision: bf16 runs it (the forward and the loss
// under bf16 autocast: bf16 GEMMs with float32 accumulation).
//
//   bench_gpt [--steps N] [--rounds R] [--variant QKV|Q=K-V|Q-K=V|Q=K=V|GQA-g|MQA|Q-GQA-g|Q-MQA]
//             [--batch 4] [--seq 64] [--vocab 50257] [--precision fp32,bf16] [--peers LIST] [--no-torch]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <memory>
#include <omp.h>

#include "autograd/autocast.h"
#include "bench/gpt2_config.h"
#include "bench/torch_runner.h"
#include "bench/torch_session.h"
#include "kernels/cpu/library_gemm.h"
#include "nn/models/gpt.h"
#include "nn/variant.h"
#include "train/optim/adam.h"

using namespace qkv;

namespace {

constexpr int64_t kPeakN = 2048;  // the GEMM peak's square size

std::string cat_precisions(const std::vector<std::string>& ps) {
  std::string out;
  for (const std::string& p : ps) out += (out.empty() ? "" : ",") + p;
  return out;
}

// The GPT, its optimizer and random tokens, warmed up by two steps; the forward and the loss run
// under `autocast` (none: float32).
struct GPTStep {
  Generator gen{0};
  nn::GPT model;
  optim::AdamW opt;
  Tensor ids, targets;
  std::optional<DType> autocast;
  GPTStep(const nn::GPTConfig& c, int64_t B, int64_t T, std::optional<DType> autocast_to)
      : model(c, &gen),
        opt(model.named_parameters(), {.lr = 1e-4, .weight_decay = 0.01}),  // torch.optim.AdamW's decay
        autocast(autocast_to) {
    ids = cast(uniform({B, T}, 0, double(c.vocab), DType::f64, &gen), DType::i64);
    targets = cast(uniform({B, T}, 0, double(c.vocab), DType::f64, &gen), DType::i64);
    for (int i = 0; i < 2; ++i) run();
  }
  void run() {
    Tensor loss;
    {
      AutocastGuard guard(autocast);
      loss = model.loss(ids, targets);
    }
    loss.backward();
    opt.step();
    opt.zero_grad();
  }
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"qkvlab GPT training-step benchmark at GPT-2 124M shapes (qkvlab vs its peers in one run)"};
  int steps = 8, rounds = 4;
  std::string variant = "QKV", peer_list = "default";
  int64_t batch = 4, seq = 64, vocab = 50257;
  bool no_torch = false;
  std::string precisions = "fp32,bf16";
  app.add_option("--steps", steps, "timed steps of each (median and best reported)")->check(CLI::Range(1, 1000));
  app.add_option("--rounds", rounds, "turns the steps are split into")->check(CLI::Range(1, 1000));
  app.add_option("--precision", precisions, "fp32, bf16 or fp32,bf16 (train.precision's meaning)")
      ->check(CLI::IsMember({"fp32", "bf16", "fp32,bf16", "bf16,fp32"}));
  app.add_option("--variant", variant, "attention variant: QKV, Q=K-V, Q-K=V, Q=K=V, GQA-g, MQA, Q-GQA-g, Q-MQA");
  app.add_option("--batch", batch, "sequences per step")->check(CLI::Range(1, 4096));
  app.add_option("--seq", seq, "tokens per sequence (at most the 1024 positions)")->check(CLI::Range(1, 1024));
  app.add_option("--vocab", vocab, "vocabulary (GPT-2: 50257; 50304 is its multiple of 64)")
      ->check(CLI::Range(2, 1 << 20));
  app.add_option("--peers", peer_list, bench::peers_help());
  app.add_flag("--no-torch", no_torch, "no peers (--peers none)");
  CLI11_PARSE(app, argc, argv);
  try {
    const nn::Variant v = nn::parse_variant(variant);
    // PyTorch's and JAX's twins have no +LRr or +linear form.
    const std::vector<bench::Peer> peers =
        bench::parse_peers(no_torch || !bench::torch_has_variant(v) ? "none" : peer_list);
    const nn::GPTConfig c = bench::gpt2_124m_config(v, vocab, 1024);
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
    std::printf("peers: %s%s\n", bench::describe_peers(peers).c_str(),
                bench::torch_has_variant(v) ? "" : " (their twins have no +LRr or +linear form)");
    // The GEMM peaks take turns with the steps too: a peak measured before the steps would meet
    // a different machine on a shared host.
    std::vector<bench::Contestant> contestants;
    for (const DType dt : {DType::f32, DType::bf16}) {
      Generator gen(1);
      const Tensor a = randn({kPeakN, kPeakN}, {}, &gen).to(dt), b = randn({kPeakN, kPeakN}, {}, &gen).to(dt);
      (void)matmul(a, b);  // warm-up: the allocator, the threads, the GEMM plan
      contestants.push_back(bench::timed([a, b] { (void)matmul(a, b); }));
    }
    std::vector<std::string> precision;
    for (const std::string p : {"fp32", "bf16"}) {
      if (precisions.find(p) == std::string::npos) continue;
      auto step = std::make_shared<GPTStep>(c, batch, seq, p == "bf16" ? std::optional(DType::bf16) : std::nullopt);
      precision.push_back(p);
      contestants.push_back(bench::timed([step] { step->run(); }));
    }
    std::vector<std::unique_ptr<bench::TorchSession>> twins;
    std::vector<std::pair<size_t, std::string>> twin_runs;  // (twin, precision) of each contestant after ours
    for (const bench::Peer& peer : peers) {
      twins.push_back(std::make_unique<bench::TorchSession>(
          peer, bench::Workload::step,
          cat("gpt --vocab ", c.vocab, " --context ", c.context, " --layers ", c.layers, " --d-model ", c.d_model(),
              " --heads ", c.attention.heads, " --kv-heads ", c.attention.kv_heads, bench::torch_slots(v.sharing),
              " --batch ", batch, " --length ", seq, " --warmup 2 --precision ", cat_precisions(precision))));
      for (const std::string& p : precision)
        if (twins.back()->serves(p)) {
          twin_runs.emplace_back(twins.size() - 1, p);
          contestants.push_back(bench::contestant(*twins.back(), p));
        }
    }
    const auto times = bench::take_turns(contestants, steps, rounds);
    const double peak_flops = 2.0 * double(kPeakN) * double(kPeakN) * double(kPeakN);
    const double peak32 = peak_flops / (bench::best_of(times[0]) * 1e6);
    const double peak16 = peak_flops / (bench::best_of(times[1]) * 1e6);
    std::printf(
        "GEMM peaks (%lldx%lldx%lld through qkvlab's matmul, best of the same turns): float32 %.1f GFLOP/s, "
        "bfloat16 %.1f GFLOP/s; %s\n",
        (long long)kPeakN, (long long)kPeakN, (long long)kPeakN, peak32, peak16,
        kernels::cpu::library_gemm_description());
    std::printf("FLOPs/step %.3g = 6 x params x tokens + 12 x layers x seq^2 x d_model x batch\n", flops);
    std::printf("%-16s %10s %10s %9s %12s %12s   (rates: the best step)\n", "", "median ms", "best ms", "GFLOP/s",
                "of fp32 peak", "of bf16 peak");
    double fp32_median = -1;
    for (size_t i = 0; i < precision.size(); ++i) {
      const double median = bench::median_of(times[2 + i]), best = bench::best_of(times[2 + i]);
      const double gflops = flops / (best * 1e6);
      std::printf("%-16s %10.1f %10.1f %9.1f %11.0f%% %11.0f%%", ("qkvlab " + precision[i]).c_str(), median, best,
                  gflops, 100 * gflops / peak32, 100 * gflops / peak16);
      if (precision[i] == "fp32") fp32_median = median;
      else if (fp32_median > 0) std::printf("   %.2fx the fp32 step", fp32_median / median);
      std::printf("\n");
    }
    std::printf(
        "\npeers (speedup: a peer's median step over qkvlab's in the same precision, from the same turns; "
        "below 1: qkvlab is slower)\n");
    bench::print_contestant_header();
    for (size_t t = 0; t < twins.size(); ++t)
      for (size_t i = 0; i < precision.size(); ++i) {
        const double mine = bench::median_of(times[2 + i]);
        const auto run = std::find(twin_runs.begin(), twin_runs.end(), std::make_pair(t, precision[i]));
        std::string why = twins[t]->note();
        if (run == twin_runs.end()) twins[t]->serves(precision[i], &why);
        const size_t k = size_t(run - twin_runs.begin());
        bench::print_contestant(twins[t]->name(), precision[i],
                                run == twin_runs.end() ? std::vector<double>{} : times[2 + precision.size() + k], mine,
                                why);
      }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_gpt: %s\n", e.what());
    return 1;
  }
  return 0;
}
