#include "bench/decode_turns.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <optional>
#include <vector>

#include "autograd/autograd.h"
#include "bench/kernel_timing.h"
#include "lab/infer/static_decoder.h"

namespace qkv::bench {

namespace {

using Clock = std::chrono::steady_clock;

// The greedy next tokens [B, 1], on the host: the read that ends a step on a GPU.
Tensor greedy(const Tensor& logits) { return argmax(logits.narrow(1, logits.size(1) - 1, 1), -1).to(kCPU); }

// A variant being decoded: its cache (prefilled), its graph when replayed, its next tokens.
struct Decoder {
  const nn::GPT* model = nullptr;
  std::unique_ptr<nn::KVCache> cache;
  std::unique_ptr<infer::StaticDecoder> graph;
  Tensor next;
  std::vector<double> step_seconds;

  void step(int64_t position) {
    const Device device = model->wte.weight.device();
    next = graph ? greedy(graph->step(next, position)) : greedy(model->forward_cached(next.to(device), *cache));
  }
};

}  // namespace

TurnTimes decode_in_turns(const std::vector<const nn::GPT*>& models, const DecodeCase& k, int64_t new_tokens,
                          const DecodeSection& section, std::vector<PeerDecoder>& peers) {
  NoGradGuard no_grad;
  std::vector<Decoder> ds;
  int64_t first_timed = 0;
  for (const nn::GPT* model : models) {
    Generator gen(0);
    const nn::GPTConfig& c = model->config();
    const Device device = model->wte.weight.device();
    Decoder d;
    d.model = model;
    d.cache = std::make_unique<nn::KVCache>(model->make_cache(k.batch, k.prompt + new_tokens, section.cache));
    const Tensor ids = cast(uniform({k.batch, k.prompt}, 0, double(c.vocab), DType::f64, &gen), DType::i64);
    d.next = greedy(model->forward_cached(ids.to(device), *d.cache));
    if (section.graph) {
      d.graph = std::make_unique<infer::StaticDecoder>(*model, *d.cache);
      d.step(k.prompt);  // the capture, not timed
      first_timed = 1;
    }
    ds.push_back(std::move(d));
  }
  for (int64_t i = first_timed; i < new_tokens; ++i) {
    for (Decoder& d : ds) {
      const auto t0 = Clock::now();
      d.step(k.prompt + i);
      d.step_seconds.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    }
    for (PeerDecoder& p : peers) {
      if (p.failed) continue;
      const std::vector<double> ms = p.twin->steps(1);
      if (ms.empty()) p.failed = true, p.ms.clear();
      else p.ms.push_back(ms[0]);
    }
  }
  TurnTimes t;
  t.graphed = !ds.empty() && ds[0].graph && ds[0].graph->graphed();
  for (const Decoder& d : ds) {
    t.median_s.push_back(median_of(d.step_seconds));
    t.step_ms.emplace_back();
    for (double seconds : d.step_seconds) t.step_ms.back().push_back(1e3 * seconds);
    std::vector<double> ratios;
    for (size_t i = 0; i < d.step_seconds.size(); ++i) ratios.push_back(ds[0].step_seconds[i] / d.step_seconds[i]);
    t.speedup.push_back(median_of(ratios));
  }
  return t;
}

double copy_bandwidth(const Device& device, int64_t mib) {
  const int64_t n = mib << 18;  // floats
  Tensor a, b;
  std::vector<float> host_a, host_b;
  std::function<void()> copy;
  if (device.is_cuda()) {
    a = ones({n}, {DType::f32, device});
    b = zeros({n}, {DType::f32, device});
    copy = [&] { b.copy_(a); };
  } else {
    host_a.assign(size_t(n), 1.0f);
    host_b.assign(size_t(n), 0.0f);
    copy = [&] {
#pragma omp parallel for schedule(static)
      for (size_t i = 0; i < size_t(n); ++i) host_b[i] = host_a[i];
    };
  }
  return 2.0 * double(n) * sizeof(float) / best_seconds({copy}, 5, device)[0];
}

}  // namespace qkv::bench
