#include "bench/bench_gpt_gpu.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <vector>

#include "bench/kernel_timing.h"
#include "bench/torch_runner.h"
#include "bench/torch_session.h"
#include "tensor/allocator.h"
#include "tensor/format.h"
#include "train/loops/mfu.h"

namespace qkv::bench {

namespace {

using Clock = std::chrono::steady_clock;

// One number through a printf format of one conversion.
std::string num(const char* format, double x) {
  char text[64];
  std::snprintf(text, sizeof text, format, x);
  return text;
}

std::string gib(int64_t bytes) { return bytes < 0 ? "–" : num("%.2f GiB", double(bytes) / double(1 << 30)); }

// One row of the table: a contestant's step times (ms), its memory peak, and qkvlab's median.
void print_row(const std::string& name, const std::vector<double>& ms, int64_t peak, double tokens, double flops,
               std::optional<double> peak_flops, double mine_ms) {
  if (ms.empty()) {
    std::printf("| %s | – | – | – | – | %s | – |\n", name.c_str(), gib(peak).c_str());
    return;
  }
  const double median = median_of(ms), best = best_of(ms);
  const std::string mfu = peak_flops ? num("%.1f%%", 100 * flops / (median * 1e-3) / *peak_flops) : "–";
  const std::string ratio = mine_ms > 0 ? num("%.2fx", mine_ms / median) : "–";
  std::printf("| %s | %.1f | %.1f | %s | %s | %s | %s |\n", name.c_str(), median, best,
              with_commas(int64_t(tokens / (median * 1e-3))).c_str(), mfu.c_str(), gib(peak).c_str(), ratio.c_str());
}

}  // namespace

int run_gpu_step_bench(const GpuStepOptions& o) {
  const nn::GPTConfig& c = o.shape.config;
  const int64_t B = o.shape.batch, T = o.shape.seq;
  const double tokens = double(B * T), flops = loops::lm_train_flops_per_token(c, T) * tokens;
  const bool bf16 = o.precision == "bf16";
  const std::string device = device_name(o.device);
  const std::optional<double> peak_flops =
      loops::known_peak_flops(device, bf16 ? loops::Precision::bf16 : loops::Precision::fp32);
  std::printf("### GPT training step on %s (%s)\n\n", device.c_str(), o.device.str().c_str());
  std::printf(
      "%s: %lld layers, d_model %lld, %lld heads, vocab %lld, %s, %s parameters, batch %lld x %lld tokens, %s, "
      "dropout 0\n\n",
      o.shape.source.c_str(), (long long)c.layers, (long long)c.d_model(), (long long)c.attention.heads,
      (long long)c.vocab, nn::variant_name(o.variant).c_str(), with_commas(nn::gpt_parameter_count(c)).c_str(),
      (long long)B, (long long)T, bf16 ? "bf16 autocast (train.precision: bf16)" : "float32");
  std::printf("FLOPs per token %.3g = 6 x parameters + 12 x layers x seq x d_model; ", flops / tokens);
  if (peak_flops)
    std::printf("MFU against %.1f TFLOP/s, the %s dense %s peak (data sheet)\n\n", *peak_flops / 1e12, device.c_str(),
                o.precision.c_str());
  else std::printf("no data-sheet peak known for %s: MFU not reported\n\n", device.c_str());

  // The twins start first: they build their models and compile while qkvlab's warms up.
  const auto start = Clock::now();
  const std::string mismatch = twin_mismatch(c, o.variant);
  std::vector<Peer> peers;
  std::string peers_failed;  // a missing interpreter: qkvlab runs alone
  try {
    peers = parse_peers(mismatch.empty() ? o.peers : "none");
  } catch (const ValueError& e) { peers_failed = e.what(); }
  std::vector<std::unique_ptr<TorchSession>> twins;
  for (const Peer& peer : peers)
    twins.push_back(std::make_unique<TorchSession>(peer, Workload::step,
                                                   cat(twin_args(c, B, T), " --precision ", o.precision,
                                                       " --device cuda:", o.device.index),
                                                   false));

  std::unique_ptr<GPTStep> step;
  try {
    step = std::make_unique<GPTStep>(c, B, T, bf16 ? std::optional(DType::bf16) : std::nullopt, o.device);
    sync(o.device);
  } catch (const Error& e) {
    std::printf("qkvlab failed: %s\n", e.what());
    return 1;
  }
  empty_cache(o.device);  // an idle contestant holds its model and optimizer state only
  reset_peak_memory(o.device);

  std::vector<Contestant> contestants = {[&](int n) {
    std::vector<double> ms;
    for (int i = 0; i < n; ++i) {
      const auto t0 = Clock::now();
      step->run();
      sync(o.device);
      ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
    empty_cache(o.device);
    return ms;
  }};
  std::vector<TorchSession*> running;
  for (auto& twin : twins) {
    const double waited = std::chrono::duration<double>(Clock::now() - start).count();
    twin->wait_ready(o.peer_timeout > 0 ? std::max(1.0, o.peer_timeout - waited) : 0);
    if (!twin->serves(o.precision)) continue;
    running.push_back(twin.get());
    contestants.push_back(contestant(*twin, o.precision));
  }
  const auto times = take_turns(contestants, o.steps, o.rounds);
  const int64_t mine_peak = int64_t(memory_stats(o.device).peak);
  const double mine = median_of(times[0]);

  std::printf(
      "each step ends with a device synchronize; %d timed steps of each contestant in %d turns, every turn after one "
      "untimed step; peak memory: the most device memory its tensors held in the timed steps (qkvlab: its caching "
      "allocator's count, PyTorch: torch.cuda.max_memory_allocated)\n\n",
      o.steps, o.rounds);
  std::printf("| contestant | median ms | best ms | tokens/s | MFU | peak memory | tokens/s over qkvlab's |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|\n");
  print_row("qkvlab", times[0], mine_peak, tokens, flops, peak_flops, mine);
  for (size_t i = 0; i < running.size(); ++i)
    print_row(cat(running[i]->name(), " (", running[i]->note(), ")"), times[1 + i], running[i]->peak_bytes(), tokens,
              flops, peak_flops, mine);
  std::printf("\n");
  if (!mismatch.empty()) std::printf("no peers: %s\n", mismatch.c_str());
  if (!peers_failed.empty()) std::printf("peers failed: %s\n", peers_failed.c_str());
  for (size_t t = 0; t < twins.size(); ++t) {  // one that died in its turns is no longer ok(), so not served
    std::string why;
    if (!twins[t]->serves(o.precision, &why)) std::printf("peer %s failed: %s\n", peers[t].spec.c_str(), why.c_str());
  }
  // Last, one line of the figures (the GPU check's summary shows a step's last line).
  std::string line = cat("summary: qkvlab ", with_commas(int64_t(tokens / (mine * 1e-3))), " tokens/s");
  if (peak_flops) line += cat(", MFU ", num("%.1f%%", 100 * flops / (mine * 1e-3) / *peak_flops));
  line += cat(", ", gib(mine_peak));
  for (size_t i = 0; i < running.size(); ++i)
    if (!times[1 + i].empty()) line += cat("; ", running[i]->name(), " ", num("%.2fx", mine / median_of(times[1 + i])));
  std::printf("%s\n", line.c_str());
  return times[0].empty() ? 1 : 0;
}

}  // namespace qkv::bench
