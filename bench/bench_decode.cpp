// Decode benchmark against the memory-bandwidth bound, at GPT-2 124M shapes (12 layers, d 768,
// 12 heads, vocab 50257, float32 weights and cache, random N(0, 0.02) weights; --layers,
// --d-model and --heads change them). A decode step is
// memory-bound: it must read every weight once (the tied token embedding as the output layer;
// one position row of wpe) and every cached K/V row of the prefix once. Per variant and case it
// prints those bytes per step, the achieved bandwidth (bytes per step x steps per second)
// against a copy's bandwidth measured in the same run, and the K=V variant's speedup over QKV
// against its ideal, the ratio of the bytes read per step. The variants' models are built and
// prefilled side by side, then decode in turns, one step of each at a time, so that the
// machine's noise hits every variant alike; each reports its median step, and its speedup is the
// median over the turns of the first variant's step time over its own in the same turn (a ratio
// of two medians would lose the pairing, and the host's speed drifts within a run). The peers
// (bench/torch_runner.h: PyTorch eager, torch.compile, JAX) decode the same model with a
// preallocated cache (bench/torch_decode.py, bench/peers/jax_decode.py; K=V: one cache tensor per
// layer) in the same turns, one step each after qkvlab's, each with its median over qkvlab's.
//
//   bench_decode [--variants QKV,Q-K=V] [--cases 8x1024,1x4096] [--new-tokens 32] [--layers 12]
//                [--d-model 768] [--heads 12] [--peers LIST] [--no-torch]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <omp.h>
#include <vector>

#include "autograd/grad_mode.h"
#include "bench/gpt2_config.h"
#include "bench/torch_runner.h"
#include "bench/torch_session.h"
#include "kernels/cpu/library_gemm.h"
#include "nn/models/gpt.h"
#include "nn/variant.h"

using namespace qkv;

namespace {

struct Case {
  int64_t batch, prompt;
};

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t comma; (comma = s.find(',', start)) != std::string::npos; start = comma + 1)
    out.push_back(s.substr(start, comma - start));
  out.push_back(s.substr(start));
  return out;
}

std::vector<Case> parse_cases(const std::string& s) {
  std::vector<Case> out;
  for (const std::string& c : split_commas(s)) {
    const size_t x = c.find('x');
    check<ValueError>(x != std::string::npos, "--cases: '", c, "' is not BATCHxPROMPT (e.g. 8x1024)");
    try {
      out.push_back({std::stoll(c.substr(0, x)), std::stoll(c.substr(x + 1))});
    } catch (const std::logic_error&) { throw ValueError(cat("--cases: '", c, "' is not BATCHxPROMPT (e.g. 8x1024)")); }
    check<ValueError>(out.back().batch > 0 && out.back().prompt > 0, "--cases: '", c, "' needs positive sizes");
  }
  return out;
}

// A copy's bandwidth, bytes read plus bytes written per second, best of 5 over 256 MiB buffers.
double copy_bandwidth() {
  const size_t n = size_t(64) << 20;
  std::vector<float> a(n, 1.0f), b(n, 0.0f);
  double best = 0;
  for (int r = 0; r < 5; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; ++i) b[i] = a[i];
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, 2.0 * double(n) * sizeof(float) / s);
  }
  return best;
}

struct Row {
  double steps_per_s = 0, bytes_per_step = 0;
};

// A peer decoding one of the variants, and its step times (ms; empty once it failed).
struct PeerDecoder {
  std::unique_ptr<bench::TorchSession> twin;
  size_t variant = 0;
  std::vector<double> ms;
  bool failed = false;
};

// A variant being decoded: its model, its cache (prefilled) and its next tokens.
struct Decoder {
  std::unique_ptr<nn::GPT> model;
  std::unique_ptr<nn::KVCache> cache;
  Tensor next;
  std::vector<double> step_seconds;
};

Tensor greedy(const Tensor& logits) { return argmax(logits.narrow(1, logits.size(1) - 1, 1), -1); }

struct TurnTimes {
  std::vector<double> median_s;              // each variant's median seconds per step
  std::vector<std::vector<double>> step_ms;  // each variant's steps, ms
  std::vector<double> speedup;               // median over turns of the first variant's step over this one's
};

// Each variant's decode steps, decoded in turns after one prefill each; each peer (prefilled when
// its twin started) decodes one step after qkvlab's in every turn.
TurnTimes decode_in_turns(const std::vector<nn::GPTConfig>& configs, const Case& k, int64_t new_tokens,
                          std::vector<PeerDecoder>& peers) {
  NoGradGuard no_grad;
  std::vector<Decoder> ds;
  for (const nn::GPTConfig& c : configs) {
    Generator gen(0);
    Decoder d;
    d.model = std::make_unique<nn::GPT>(c, &gen);
    d.model->eval();
    d.cache = std::make_unique<nn::KVCache>(d.model->make_cache(k.batch, c.context, DType::f32));
    const Tensor ids = cast(uniform({k.batch, k.prompt}, 0, double(c.vocab), DType::f64, &gen), DType::i64);
    d.next = greedy(d.model->forward_cached(ids, *d.cache));
    ds.push_back(std::move(d));
  }
  for (int64_t i = 0; i < new_tokens; ++i) {
    for (Decoder& d : ds) {
      const auto t0 = std::chrono::steady_clock::now();
      d.next = greedy(d.model->forward_cached(d.next, *d.cache));
      d.step_seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    for (PeerDecoder& p : peers) {
      if (p.failed) continue;
      const std::vector<double> ms = p.twin->steps(1);
      if (ms.empty()) p.failed = true, p.ms.clear();
      else p.ms.push_back(ms[0]);
    }
  }
  TurnTimes t;
  for (const Decoder& d : ds) {
    t.median_s.push_back(bench::median_of(d.step_seconds));
    t.step_ms.emplace_back();
    for (double seconds : d.step_seconds) t.step_ms.back().push_back(1e3 * seconds);
    std::vector<double> ratios;
    for (size_t i = 0; i < d.step_seconds.size(); ++i) ratios.push_back(ds[0].step_seconds[i] / d.step_seconds[i]);
    t.speedup.push_back(bench::median_of(ratios));
  }
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"qkvlab decode benchmark against the memory-bandwidth bound (GPT-2 124M shapes, vs its peers)"};
  std::string variants = "QKV,Q-K=V", cases = "8x1024,1x4096";
  int64_t new_tokens = 32, layers = 12, d_model = 768, heads = 12;
  bool no_torch = false;
  std::string peer_list = "default";
  app.add_option("--variants", variants, "attention variants, comma-separated (the first is the reference)");
  app.add_option("--cases", cases, "BATCHxPROMPT, comma-separated");
  app.add_option("--new-tokens", new_tokens, "decoded tokens per case (the median step is timed)")
      ->check(CLI::Range(2, 4096));
  app.add_option("--layers", layers, "layers (GPT-2 124M: 12)")->check(CLI::Range(1, 1000));
  app.add_option("--d-model", d_model, "model width (GPT-2 124M: 768)")->check(CLI::Range(1, 1 << 16));
  app.add_option("--heads", heads, "attention heads (GPT-2 124M: 12)")->check(CLI::Range(1, 1024));
  app.add_option("--peers", peer_list, bench::peers_help());
  app.add_flag("--no-torch", no_torch, "no peers (--peers none)");
  CLI11_PARSE(app, argc, argv);
  try {
    const std::vector<bench::Peer> peers = bench::parse_peers(no_torch ? "none" : peer_list);
    check<ValueError>(d_model % heads == 0, "--d-model ", d_model, " is not a multiple of --heads ", heads);
    const std::vector<Case> cs = parse_cases(cases);
    const std::vector<std::string> names = split_commas(variants);
    std::vector<nn::Variant> parsed;  // checked before anything runs
    for (const std::string& name : names) {
      parsed.push_back(nn::parse_variant(name));
      bench::check_gpt_variant(parsed.back());
      check<ValueError>(!parsed.back().linear, name,
                        " keeps a fixed-size state, not a cache of rows; `qkvlab bench decode` measures it");
    }
    const double copy_bw = copy_bandwidth();
    std::printf(
        "decode, %lld layers, d_model %lld, %lld heads, vocab 50257%s, float32 weights and cache, %d threads, "
        "GEMMs: %s\n",
        (long long)layers, (long long)d_model, (long long)heads,
        layers == 12 && d_model == 768 && heads == 12 ? " (GPT-2 124M)" : "", omp_get_max_threads(),
        kernels::cpu::library_gemm_description());
    std::printf("peers: %s\n", bench::describe_peers(peers).c_str());
    std::printf("copy bandwidth (read + write): %.1f GB/s\n", copy_bw / 1e9);
    for (const Case& k : cs) {
      std::printf("\nbatch %lld, prompt %lld, %lld new tokens\n", (long long)k.batch, (long long)k.prompt,
                  (long long)new_tokens);
      std::printf("%-10s %10s %12s %9s %8s %10s %10s %9s\n", "variant", "tokens/s", "MB/step", "GB/s", "of copy",
                  "speedup", "ideal", "of ideal");
      const int64_t context = k.prompt + new_tokens;
      std::vector<nn::GPTConfig> configs;
      for (const nn::Variant& v : parsed) {
        configs.push_back(bench::gpt2_124m_config(v, 50257, context));
        configs.back().layers = layers;
        configs.back().attention.d_model = d_model;
        configs.back().attention.heads = heads;
      }
      std::vector<PeerDecoder> twins;
      for (size_t i = 0; i < names.size(); ++i) {
        const nn::GPTConfig& c = configs[i];
        for (const bench::Peer& peer : bench::torch_has_variant(parsed[i]) ? peers : std::vector<bench::Peer>{}) {
          PeerDecoder p;
          p.variant = i;
          p.twin =
              std::make_unique<bench::TorchSession>(peer, bench::Workload::decode,
                                                    cat("--vocab ", c.vocab, " --context ", context, " --layers ",
                                                        c.layers, " --d-model ", c.d_model(), " --heads ",
                                                        c.attention.heads, " --kv-heads ", c.attention.kv_heads,
                                                        bench::torch_slots(c.attention.sharing), " --batch ", k.batch,
                                                        " --prompt ", k.prompt, " --new-tokens ", new_tokens));
          p.failed = !p.twin->ok();
          twins.push_back(std::move(p));
        }
      }
      const TurnTimes turns = decode_in_turns(configs, k, new_tokens, twins);
      std::vector<Row> rows(names.size());
      for (size_t i = 0; i < names.size(); ++i) {
        const nn::GPTConfig& c = configs[i];
        Row& row = rows[i];
        row.steps_per_s = 1.0 / turns.median_s[i];
        // Weights once (all but the position table, of which one row), the prefix's cache rows
        // once: on average prompt + (new_tokens + 1) / 2 positions per sequence.
        const double weights = double(nn::gpt_parameter_count(c) - c.context * c.d_model()) * sizeof(float);
        const double rows_read = double(k.prompt) + double(new_tokens + 1) / 2;
        row.bytes_per_step = weights + double(nn::KVCache::bytes_per_token(c.attention, c.layers, DType::f32)) *
                                           rows_read * double(k.batch);
        const Row& ref = rows.front();
        const double bw = row.bytes_per_step * row.steps_per_s;
        const double speedup = turns.speedup[i], ideal = ref.bytes_per_step / row.bytes_per_step;
        std::printf("%-10s %10.1f %12.1f %9.1f %7.0f%% %9.3fx %9.3fx %8.1f%%\n", names[i].c_str(),
                    row.steps_per_s * double(k.batch), row.bytes_per_step / 1e6, bw / 1e9, 100 * bw / copy_bw, speedup,
                    ideal, 100 * speedup / ideal);
      }
      if (twins.empty()) continue;
      std::printf(
          "\npeers, batch %lld (speedup: a peer's median step over qkvlab's for the same variant, from the "
          "same turns; below 1: qkvlab is slower)\n",
          (long long)k.batch);
      bench::print_contestant_header("variant");
      for (size_t i = 0; i < names.size(); ++i) {
        bench::print_contestant("qkvlab", names[i], turns.step_ms[i], -1, "");
        for (const PeerDecoder& p : twins)
          if (p.variant == i)
            bench::print_contestant(p.twin->name(), names[i], p.ms, 1e3 * turns.median_s[i], p.twin->note());
      }
    }
    std::printf(
        "\nMB/step: weights once + the prefix's cache rows once per step; GB/s = MB/step x steps/s; speedup: the "
        "median over turns of the first variant's step time over this one's; ideal: the first variant's MB/step "
        "over this one's\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_decode: %s\n", e.what());
    return 1;
  }
  return 0;
}
