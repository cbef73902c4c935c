// GPT training-step benchmark. On the CPU (the default) at GPT-2 124M shapes (12 layers, d_model
// 768, 12 heads, vocab 50257, 1024 positions, dropout 0): ms per step (forward, cross-entropy,
// backward, AdamW step, zero_grad; median and best of --steps) of nn::GPT in qkvlab and of the same
// model in its peers (bench/torch_runner.h: PyTorch eager, torch.compile, JAX), all taking turns in
// the same run (bench/torch_session.h), with each peer's median over qkvlab's in the same precision
// (bf16: torch.autocast's; not JAX's, whose CPU backend computes bf16 dots in float32); qkvlab's
// achieved GFLOP/s (6 x parameters x tokens + 12 x layers x seq^2 x d_model per sequence) against
// the machine's float32 and bfloat16 GEMM peaks, measured through qkvlab's matmul (2048^3) in the
// same turns. Rate and peak are both bests of their turns: a shared host's noise only ever adds
// time (here it moved the same 2048^3 GEMM by 2x within one run), so a median peak understates
// the peak and flatters the share, and the bests compare the step's own speed with the GEMM's.
// The step runs in float32 and again as train.precision: bf16 runs it (the forward and the loss
// under bf16 autocast: bf16 GEMMs with float32 accumulation).
// With --device cuda:N, the step of an experiment file's GPT (--config, default the paper's 300M:
// experiments/lm/gpt-300m.yaml at --scale paper, its micro-batch of 6 x 2048 tokens) in one
// precision (bf16 by default) on the GPU beside PyTorch eager and torch.compile on the same card
// (bench/bench_gpt_gpu.h).
//
//   bench_gpt [--steps N] [--rounds R] [--variant QKV|Q=K-V|Q-K=V|Q=K=V|GQA-g|MQA|Q-GQA-g|Q-MQA]
//             [--batch 4] [--seq 64] [--vocab 50257] [--precision fp32,bf16] [--peers LIST] [--no-torch]
//   bench_gpt --device cuda:0 [--config FILE] [--scale NAME] [--variant V] [--precision bf16|fp32]
//             [--batch B] [--seq T] [--peers LIST] [--peer-timeout S] [--steps N] [--rounds R]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <memory>
#include <omp.h>

#include "bench/bench_gpt_gpu.h"
#include "bench/bench_programs.h"
#include "bench/gpt2_config.h"
#include "bench/gpt_step.h"
#include "bench/torch_runner.h"
#include "bench/torch_session.h"
#include "kernels/cpu/library_gemm.h"
#include "nn/models/gpt.h"
#include "nn/variant.h"
#include "train/loops/mfu.h"

using namespace qkv;
using bench::GPTShape;
using bench::GPTStep;

namespace {

constexpr int64_t kPeakN = 2048;  // the GEMM peak's square size

std::string cat_precisions(const std::vector<std::string>& ps) {
  std::string out;
  for (const std::string& p : ps) out += (out.empty() ? "" : ",") + p;
  return out;
}

// --shape tiny (hidden): a GPT of 2 layers, d_model 128, 2 heads of 64, vocab 512, batch 2 x 64,
// to run the GPU path end to end where there is no GPU (the emulated device is slow).
GPTShape tiny_shape(const nn::Variant& v) {
  GPTShape s;
  s.config = bench::gpt2_124m_config(v, 512, 64);
  s.config.layers = 2;
  s.config.attention.d_model = 128;
  s.config.attention.heads = 2;
  s.batch = 2;
  s.seq = 64;
  s.source = "--shape tiny";
  return s;
}

}  // namespace

int bench_gpt_main(int argc, char** argv) {
  CLI::App app{
      "qkvlab GPT training-step benchmark: GPT-2 124M shapes on the CPU, an experiment file's GPT on a GPU "
      "(qkvlab vs its peers in one run)"};
  int steps = 8, rounds = 4;
  std::string variant = "QKV", peer_list = "default", device = "cpu", config, scale, shape;
  int64_t batch = 4, seq = 64, vocab = 50257;
  bool no_torch = false;
  double peer_timeout = 300;
  std::string precisions = "fp32,bf16";
  app.add_option("--steps", steps, "timed steps of each (median and best reported)")->check(CLI::Range(1, 1000));
  app.add_option("--rounds", rounds, "turns the steps are split into")->check(CLI::Range(1, 1000));
  app.add_option("--precision", precisions, "fp32, bf16 or fp32,bf16 (train.precision's meaning)")
      ->check(CLI::IsMember({"fp32", "bf16", "fp32,bf16", "bf16,fp32"}));
  app.add_option("--variant", variant, "attention variant: QKV, Q=K-V, Q-K=V, Q=K=V, GQA-g, MQA, Q-GQA-g, Q-MQA");
  app.add_option("--batch", batch, "sequences per step (on a GPU default: the file's train.batch_size)")
      ->check(CLI::Range(1, 4096));
  app.add_option("--seq", seq, "tokens per sequence (at most the positions; on a GPU default: the file's context)")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--vocab", vocab, "vocabulary (GPT-2: 50257; 50304 is its multiple of 64)")
      ->check(CLI::Range(2, 1 << 20));
  app.add_option("--peers", peer_list, bench::peers_help());
  app.add_flag("--no-torch", no_torch, "no peers (--peers none)");
  app.add_option("--device", device, "cpu (GPT-2 124M shapes) or cuda:N (an experiment file's GPT)");
  app.add_option("--config", config,
                 "on a GPU: the experiment file whose model and micro-batch are timed (default "
                 "experiments/lm/gpt-300m.yaml of the source tree)");
  app.add_option("--scale", scale, "on a GPU: the file's scale (default paper when the file has it)");
  app.add_option("--peer-timeout", peer_timeout, "on a GPU: seconds a twin may take to be ready (compiling), 0 none")
      ->check(CLI::Range(0.0, 1e6));
  app.add_option("--shape", shape, "tiny: a small GPT to test the GPU path on the emulated device")
      ->check(CLI::IsMember({"tiny"}))
      ->group("");
  CLI11_PARSE(app, argc, argv);
  try {
    const Device dev(device);
    if (dev.is_cuda()) {
      check_device_usable(dev, "--device");
      bench::GpuStepOptions o;
      o.device = dev;
      o.variant = nn::parse_variant(variant);
      if (!shape.empty()) {
        o.shape = tiny_shape(o.variant);
      } else {
        if (config.empty()) config = bench::source_dir() + "/experiments/lm/gpt-300m.yaml";
        if (scale.empty() && config.ends_with("gpt-300m.yaml")) scale = "paper";
        o.shape = bench::gpt_shape_from_file(config, scale, o.variant);
      }
      if (app.count("--batch")) o.shape.batch = batch;
      if (app.count("--seq")) o.shape.seq = seq;
      check<ValueError>(o.shape.seq <= o.shape.config.context, "--seq ", o.shape.seq, " exceeds the model's ",
                        o.shape.config.context, " positions");
      o.precision = app.count("--precision") ? precisions : "bf16";
      check<ValueError>(o.precision == "fp32" || o.precision == "bf16",
                        "--precision: on a GPU one precision at a time, fp32 or bf16");
      o.steps = steps;
      o.rounds = rounds;
      o.peers = no_torch ? "none" : peer_list == "default" ? "torch@python3,torch-compile@python3" : peer_list;
      o.peer_timeout = peer_timeout;
      return bench::run_gpu_step_bench(o);
    }
    check<ValueError>(config.empty() && scale.empty() && shape.empty(),
                      "--config, --scale and --shape are for a GPU (--device cuda:N)");
    check<ValueError>(seq <= 1024, "--seq ", seq, " exceeds the 1024 positions");
    const nn::Variant v = nn::parse_variant(variant);
    // PyTorch's and JAX's twins have no +LRr or +linear form.
    const std::vector<bench::Peer> peers =
        bench::parse_peers(no_torch || !bench::torch_has_variant(v) ? "none" : peer_list);
    const nn::GPTConfig c = bench::gpt2_124m_config(v, vocab, 1024);
    const int64_t params = nn::gpt_parameter_count(c);
    const double flops = loops::lm_train_flops_per_token(c, seq) * double(batch * seq);
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
      twins.push_back(std::make_unique<bench::TorchSession>(peer, bench::Workload::step,
                                                            cat(bench::twin_args(c, batch, seq), " --precision ",
                                                                cat_precisions(precision))));
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

#ifndef QKV_BENCH_MULTI  // bench_multi.cpp holds the main of the program that bundles this one
int main(int argc, char** argv) { return bench_gpt_main(argc, argv); }
#endif
