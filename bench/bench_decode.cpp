// Decode benchmark against the memory-bandwidth bound, at GPT-2 124M shapes (12 layers, d 768,
// 12 heads, vocab 50257, float32 weights and cache, random N(0, 0.02) weights; --layers,
// --d-model and --heads change them, --llama puts the Llama block at that shape, --config takes an
// experiment file's GPT). A decode step is
// memory-bound: it must read every weight once (the tied token embedding as the output layer;
// one position row of wpe) and every cached K/V row of the prefix once. Per variant and case it
// prints those bytes per step, the achieved bandwidth (bytes per step x steps per second)
// against a copy's bandwidth measured in the same run, the variant's speedup over the first
// (QKV) against its ideal, the ratio of the bytes read per step, and its cache's size against
// the first's. The variants' models are built once and prefilled side by side, then decode in
// turns, one step of each at a time, so that the machine's noise hits every variant alike; each
// reports its median step, and its speedup is the median over the turns of the first variant's
// step time over its own in the same turn (a ratio of two medians would lose the pairing, and the
// host's speed drifts within a run). The peers (bench/torch_runner.h: PyTorch eager,
// torch.compile, JAX) decode the same model with a preallocated cache (bench/torch_decode.py,
// bench/peers/jax_decode.py; K=V: one cache tensor per layer) in the same turns, one step each
// after qkvlab's, each with its median over qkvlab's.
// On a GPU (--device cuda:N; bench/decode_turns.h) a step ends when its tokens are on the host;
// --precision bf16 runs bf16 weights and activations, --cache-dtype lists the caches' storages
// and --modes eager,graph decodes each case again replaying a CUDA graph per step; the peers
// (eager, on the same card) decode in the eager section of their cache dtype.
//
//   bench_decode [--variants QKV,Q-K=V] [--cases 8x1024,1x4096] [--new-tokens 32] [--layers 12]
//                [--d-model 768] [--heads 12] [--llama] [--config FILE [--scale NAME]] [--device cpu|cuda:N]
//                [--precision fp32|bf16] [--cache-dtype f32,bf16,int8] [--modes eager,graph]
//                [--peers LIST] [--peer-variants LIST] [--peer-timeout S] [--no-torch]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <omp.h>
#include <vector>

#include "bench/bench_programs.h"
#include "bench/decode_turns.h"
#include "bench/gpt2_config.h"
#include "bench/gpt_step.h"
#include "bench/torch_runner.h"
#include "bench/torch_session.h"
#include "kernels/cpu/library_gemm.h"
#include "lab/infer/decode_bench.h"
#include "nn/models/gpt.h"
#include "nn/variant.h"

using namespace qkv;

namespace {

using bench::DecodeCase;
using bench::PeerDecoder;

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t comma; (comma = s.find(',', start)) != std::string::npos; start = comma + 1)
    out.push_back(s.substr(start, comma - start));
  out.push_back(s.substr(start));
  return out;
}

std::vector<DecodeCase> parse_cases(const std::string& s) {
  std::vector<DecodeCase> out;
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

struct Row {
  double steps_per_s = 0, bytes_per_step = 0, cache_per_token = 0;
};

// The sections of a case: each cache dtype, eager and (with graph) replayed as a CUDA graph; the
// one the peers decode in (eager, their cache dtype) last, so their twins have the others' time to
// start.
std::vector<bench::DecodeSection> sections_of(const std::vector<DType>& caches, const std::vector<std::string>& modes,
                                              DType peer_cache) {
  std::vector<bench::DecodeSection> out;
  for (const DType cache : caches)
    for (const std::string& m : modes) out.push_back({cache, m == "graph"});
  std::stable_partition(out.begin(), out.end(),
                        [&](const bench::DecodeSection& s) { return s.graph || s.cache != peer_cache; });
  return out;
}

// K=V against the reference in one section: its speedup beside the two byte ratios; its share of
// the ideal is added to `shares` for the closing line.
void print_kv_summary(const std::vector<std::string>& names, const std::vector<Row>& rows,
                      const std::vector<double>& speedup, const std::string& section, std::string& shares) {
  const auto kv = std::find(names.begin(), names.end(), "Q-K=V");
  if (kv == names.end() || kv == names.begin()) return;
  const size_t i = size_t(kv - names.begin());
  const double ideal = rows[0].bytes_per_step / rows[i].bytes_per_step;
  std::printf(
      "Q-K=V vs %s: %.3fx the speed; bytes per step %.3fx fewer (%.1f%% of that ideal: the goal of 95%% %s); "
      "the cache %.2fx smaller\n",
      names[0].c_str(), speedup[i], ideal, 100 * speedup[i] / ideal, speedup[i] >= 0.95 * ideal ? "met" : "missed",
      rows[0].cache_per_token / rows[i].cache_per_token);
  char share[96];
  std::snprintf(share, sizeof share, "%s%s %.1f%%", shares.empty() ? "" : ", ", section.c_str(),
                100 * speedup[i] / ideal);
  shares += share;
}

}  // namespace

int bench_decode_main(int argc, char** argv) {
  CLI::App app{"qkvlab decode benchmark against the memory-bandwidth bound (GPT-2 124M shapes, vs its peers)"};
  std::string variants = "QKV,Q-K=V", cases = "8x1024,1x4096";
  int64_t new_tokens = 32, layers = 12, d_model = 768, heads = 12;
  bool no_torch = false, llama = false;
  double peer_timeout = 0;
  int64_t copy_mib = 256;
  std::string peer_list = "default", peer_variants, device = "cpu", precision = "fp32", cache_dtypes = "f32",
              modes = "eager", config, scale;
  app.add_option("--variants", variants, "attention variants, comma-separated (the first is the reference)");
  app.add_option("--cases", cases, "BATCHxPROMPT, comma-separated");
  app.add_option("--new-tokens", new_tokens, "decoded tokens per case (the median step is timed)")
      ->check(CLI::Range(2, 4096));
  app.add_option("--layers", layers, "layers (GPT-2 124M: 12)")->check(CLI::Range(1, 1000));
  app.add_option("--d-model", d_model, "model width (GPT-2 124M: 768)")->check(CLI::Range(1, 1 << 16));
  app.add_option("--heads", heads, "attention heads (GPT-2 124M: 12)")->check(CLI::Range(1, 1024));
  app.add_option("--config", config, "an experiment file whose GPT is decoded instead (its model section)");
  app.add_flag("--llama", llama,
               "the Llama block at the same shape: RMS norms, rotary positions (a K=V cache stores s once and turns "
               "each key as it reads it), a SwiGLU MLP 8/3 d_model wide, no biases");
  app.add_option("--scale", scale, "the experiment file's scale");
  app.add_option("--device", device, "cpu or cuda:N");
  app.add_option("--precision", precision, "weights and activations: fp32, or bf16 (on a GPU)")
      ->check(CLI::IsMember({"fp32", "bf16"}));
  app.add_option("--cache-dtype", cache_dtypes, "the caches' storages, comma-separated: f32, bf16, f16, int8");
  app.add_option("--modes", modes, "eager, graph (a CUDA graph replayed per step) or eager,graph");
  app.add_option("--peers", peer_list, bench::peers_help());
  app.add_option("--peer-variants", peer_variants, "the variants the peers decode (default: all they have)");
  app.add_option("--peer-timeout", peer_timeout, "seconds a twin may take to be ready, 0 none")
      ->check(CLI::Range(0.0, 1e6));
  app.add_flag("--no-torch", no_torch, "no peers (--peers none)");
  app.add_option("--copy-mib", copy_mib, "MiB the copy baseline copies (an emulated device wants few)")
      ->check(CLI::Range(1, 1 << 16));
  CLI11_PARSE(app, argc, argv);
  try {
    const Device dev(device);
    check_device_usable(dev, "--device");
    std::vector<bench::Peer> peers;
    std::string peers_failed;  // a missing interpreter: qkvlab decodes alone
    try {
      peers = bench::parse_peers(no_torch ? "none" : peer_list);
    } catch (const ValueError& e) { peers_failed = e.what(); }
    check<ValueError>(d_model % heads == 0, "--d-model ", d_model, " is not a multiple of --heads ", heads);
    const std::vector<DecodeCase> cs = parse_cases(cases);
    const std::vector<std::string> names = split_commas(variants);
    const std::vector<DType> caches = infer::parse_cache_dtypes(cache_dtypes, "--cache-dtype");
    const std::vector<std::string> mode_list = split_commas(modes);
    for (const std::string& m : mode_list)
      check<ValueError>(m == "eager" || m == "graph", "--modes: '", m, "' is not eager or graph");
    const infer::DecodeDtypes dts = infer::decode_dtypes(infer::parse_decode_precision(precision), dev);
    std::vector<nn::Variant> parsed;  // checked before anything runs
    for (const std::string& name : names) {
      parsed.push_back(nn::parse_variant(name));
      bench::check_gpt_variant(parsed.back());
      check<ValueError>(!parsed.back().linear, name,
                        " keeps a fixed-size state, not a cache of rows; `qkvlab bench decode` measures it");
    }
    const std::vector<std::string> peer_names = peer_variants.empty() ? names : split_commas(peer_variants);
    int64_t context = 0;
    for (const DecodeCase& k : cs) context = std::max(context, k.prompt + new_tokens);
    // Each variant's model once, for every case: its positions cover the longest.
    std::vector<nn::GPTConfig> configs;
    std::vector<std::unique_ptr<nn::GPT>> models;
    for (const nn::Variant& v : parsed) {
      nn::GPTConfig c = bench::gpt2_124m_config(v, 50257, context);
      c.layers = layers;
      c.attention.d_model = d_model;
      c.attention.heads = heads;
      if (llama) {
        c = nn::llama_block(c);
        c.ffn = (8 * d_model / 3 + 63) / 64 * 64;  // SwiGLU's three matrices: about the parameters of GPT-2's two
      }
      if (!config.empty()) c = bench::gpt_shape_from_file(config, scale, v).config;
      c.context = std::max(c.context, context);
      configs.push_back(c);
    }
    const nn::GPTConfig& c0 = configs.front();
    const double copy_bw = bench::copy_bandwidth(dev, copy_mib);
    const std::string storage = dts.weights == DType::f32 && caches == std::vector<DType>{DType::f32}
                                    ? "float32 weights and cache"
                                    : cat(dtype_name(dts.weights), " weights, KV cache ", cache_dtypes);
    std::printf("decode, %lld layers, d_model %lld, %lld heads, vocab %lld%s%s, %s, %d threads, ", (long long)c0.layers,
                (long long)c0.d_model(), (long long)c0.attention.heads, (long long)c0.vocab,
                config.empty() && layers == 12 && d_model == 768 && heads == 12 ? " (GPT-2 124M)" : "",
                c0.attention.rope ? ", the Llama block" : "", storage.c_str(), omp_get_max_threads());
    std::printf("GEMMs: %s\n", dev.is_cpu() ? kernels::cpu::library_gemm_description() : "cuBLASLt");
    if (dev.is_cuda() || dts.weights != DType::f32)
      std::printf("on %s (%s); %s\n", dev.str().c_str(), device_name(dev).c_str(), dts.note.c_str());
    if (!config.empty())
      std::printf("the GPT of %s%s\n", config.c_str(), scale.empty() ? "" : (" --scale " + scale).c_str());
    std::printf("peers: %s\n", bench::describe_peers(peers).c_str());
    if (!peers_failed.empty()) std::printf("peers failed: %s\n", peers_failed.c_str());
    std::printf("copy bandwidth (read + write): %.1f GB/s\n", copy_bw / 1e9);
    // The peers' twins, every case's, start together and build while qkvlab's models are built.
    const DType peer_cache = dts.weights;  // the twins store their cache as their weights
    std::vector<std::vector<PeerDecoder>> twins(cs.size());
    for (size_t ki = 0; ki < cs.size(); ++ki)
      for (size_t i = 0; i < names.size(); ++i) {
        const nn::GPTConfig& c = configs[i];
        const bool twin_has = bench::twin_mismatch(c, parsed[i]).empty() &&
                              std::find(peer_names.begin(), peer_names.end(), names[i]) != peer_names.end() &&
                              std::find(caches.begin(), caches.end(), peer_cache) != caches.end();
        for (const bench::Peer& peer : twin_has ? peers : std::vector<bench::Peer>{}) {
          PeerDecoder p;
          p.variant = i;
          p.twin = std::make_unique<bench::TorchSession>(
              peer, bench::Workload::decode,
              cat("--vocab ", c.vocab, " --context ", cs[ki].prompt + new_tokens, " --layers ", c.layers, " --d-model ",
                  c.d_model(), " --heads ", c.attention.heads, " --kv-heads ", c.attention.kv_heads,
                  bench::torch_slots(c.attention.sharing), " --batch ", cs[ki].batch, " --prompt ", cs[ki].prompt,
                  " --new-tokens ", new_tokens, dev.is_cuda() ? cat(" --device ", dev.str()) : "",
                  dts.weights == DType::bf16 ? " --precision bf16" : ""),
              false);
          twins[ki].push_back(std::move(p));
        }
      }
    const auto start = std::chrono::steady_clock::now();
    std::vector<const nn::GPT*> model_ptrs;
    for (const nn::GPTConfig& c : configs) {
      Generator gen(0);
      models.push_back(std::make_unique<nn::GPT>(c, &gen));
      models.back()->to(dev);
      models.back()->to(dts.weights);
      models.back()->eval();
      model_ptrs.push_back(models.back().get());
    }
    std::string kv_shares;  // Q-K=V's speedup as a share of its ideal, per section
    for (size_t ki = 0; ki < cs.size(); ++ki) {
      const DecodeCase& k = cs[ki];
      for (const bench::DecodeSection& section : sections_of(caches, mode_list, peer_cache)) {
        const bool with_peers = !section.graph && section.cache == peer_cache;
        std::vector<PeerDecoder> none, &peer_decoders = with_peers ? twins[ki] : none;
        for (PeerDecoder& p : peer_decoders) {
          const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
          p.twin->wait_ready(peer_timeout > 0 ? std::max(1.0, peer_timeout - waited) : 0);
          p.failed = !p.twin->ok();
        }
        std::printf("\nbatch %lld, prompt %lld, %lld new tokens", (long long)k.batch, (long long)k.prompt,
                    (long long)new_tokens);
        if (dev.is_cuda() || caches.size() > 1 || mode_list.size() > 1 || section.cache != DType::f32)
          std::printf(", KV cache %s, %s", dtype_name(section.cache), section.graph ? "CUDA graph" : "eager");
        std::printf("\n%-10s %10s %12s %9s %8s %10s %10s %9s %11s\n", "variant", "tokens/s", "MB/step", "GB/s",
                    "of copy", "speedup", "ideal", "of ideal", "cache ratio");
        const bench::TurnTimes turns = bench::decode_in_turns(model_ptrs, k, new_tokens, section, peer_decoders);
        std::vector<Row> rows(names.size());
        for (size_t i = 0; i < names.size(); ++i) {
          const nn::GPTConfig& c = configs[i];
          Row& row = rows[i];
          row.steps_per_s = 1.0 / turns.median_s[i];
          // Weights once (all but the position table, of which one row), the prefix's cache rows
          // once: on average prompt + (new_tokens + 1) / 2 positions per sequence.
          const double weights =
              double(nn::gpt_parameter_count(c) - c.context * c.d_model()) * double(dtype_size(dts.weights));
          const double rows_read = double(k.prompt) + double(new_tokens + 1) / 2;
          row.cache_per_token = double(nn::KVCache::bytes_per_token(c.attention, c.layers, section.cache));
          row.bytes_per_step = weights + row.cache_per_token * rows_read * double(k.batch);
          const Row& ref = rows.front();
          const double bw = row.bytes_per_step * row.steps_per_s;
          const double speedup = turns.speedup[i], ideal = ref.bytes_per_step / row.bytes_per_step;
          std::printf("%-10s %10.1f %12.1f %9.1f %7.0f%% %9.3fx %9.3fx %8.1f%% %10.2fx\n", names[i].c_str(),
                      row.steps_per_s * double(k.batch), row.bytes_per_step / 1e6, bw / 1e9, 100 * bw / copy_bw,
                      speedup, ideal, 100 * speedup / ideal, ref.cache_per_token / row.cache_per_token);
        }
        if (section.graph && !turns.graphed) std::printf("(the static decode step ran eagerly: no CUDA graph here)\n");
        if (dev.is_cuda())
          print_kv_summary(names, rows, turns.speedup,
                           cat(k.batch, "x", k.prompt, " ", dtype_short_name(section.cache),
                               section.graph ? " graph" : ""),
                           kv_shares);
        if (peer_decoders.empty()) continue;
        std::printf(
            "\npeers, batch %lld (speedup: a peer's median step over qkvlab's for the same variant, from the "
            "same turns; below 1: qkvlab is slower)\n",
            (long long)k.batch);
        bench::print_contestant_header("variant");
        for (size_t i = 0; i < names.size(); ++i) {
          bench::print_contestant("qkvlab", names[i], turns.step_ms[i], -1, "");
          for (const PeerDecoder& p : peer_decoders)
            if (p.variant == i)
              bench::print_contestant(p.twin->name(), names[i], p.ms, 1e3 * turns.median_s[i], p.twin->note());
        }
        for (const PeerDecoder& p : peer_decoders)
          if (p.failed && !p.twin->ok())
            std::printf("peer %s failed (%s): %s\n", p.twin->name().c_str(), names[p.variant].c_str(),
                        p.twin->note().c_str());
        peer_decoders.clear();  // each twin's cache holds one case's tokens
      }
    }
    std::printf(
        "\nMB/step: weights once + the prefix's cache rows once per step; GB/s = MB/step x steps/s; speedup: the "
        "median over turns of the first variant's step time over this one's; ideal: the first variant's MB/step "
        "over this one's; cache ratio: the first variant's cache bytes per token over this one's\n");
    // Last, one line of the figures (the GPU check's summary shows a step's last line).
    if (!kv_shares.empty()) std::printf("Q-K=V's speedup, share of its ideal: %s\n", kv_shares.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_decode: %s\n", e.what());
    return 1;
  }
  return 0;
}

#ifndef QKV_BENCH_MULTI  // bench_multi.cpp holds the main of the program that bundles this one
int main(int argc, char** argv) { return bench_decode_main(argc, argv); }
#endif
