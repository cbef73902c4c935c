// bench_decode: build, prefill, greedy decode, and the allocator's and the cache's byte counts.
// Each step's next tokens go to the host (as a sampler checking for end-of-text would), which
// also makes the timings wait for the device.
#include "lab/infer/decode_bench.h"

#include <chrono>

#include "autograd/grad_mode.h"
#include "tensor/allocator.h"

namespace qkv::infer {

namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// The greedy next token of each sequence from logits [B, T, V]: ids [B, 1] on the host.
Tensor next_tokens(const Tensor& logits) {
  const int64_t T = logits.size(1);
  return argmax(logits.narrow(1, T - 1, 1), -1).to(kCPU);
}
}  // namespace

DecodeBenchResult bench_decode(const nn::GPTConfig& c, int64_t batch, int64_t context, int64_t prompt,
                               int64_t new_tokens, DType cache_dtype, const Device& device) {
  check<ValueError>(batch > 0 && prompt > 0 && new_tokens >= 0, "bench_decode: batch ", batch, " and prompt ", prompt,
                    " must be positive and new_tokens ", new_tokens, " non-negative");
  check<ValueError>(prompt + new_tokens <= context && context <= c.context, "bench_decode: prompt ", prompt, " + ",
                    new_tokens, " new tokens must fit the cache's ", context, " positions, at most the model's ",
                    c.context);
  NoGradGuard no_grad;
  Generator gen(0);
  nn::GPT model(c, &gen);
  model.to(device);
  model.eval();
  Tensor ids = cast(uniform({batch, prompt}, 0, double(c.vocab), DType::f64, &gen), DType::i64).to(device);

  reset_peak_memory(device);
  nn::KVCache cache = model.make_cache(batch, context, cache_dtype);
  DecodeBenchResult r;
  r.cache_bytes = cache.bytes();

  auto t0 = Clock::now();
  Tensor next = next_tokens(model.forward_cached(ids, cache));
  r.prefill_ms = 1e3 * seconds_since(t0);

  t0 = Clock::now();
  for (int64_t i = 0; i < new_tokens; ++i) next = next_tokens(model.forward_cached(next.to(device), cache));
  const double decode_s = seconds_since(t0);
  r.decode_tokens_per_s = new_tokens > 0 ? double(batch * new_tokens) / decode_s : 0.0;
  r.peak_bytes = int64_t(memory_stats(device).peak);
  return r;
}

}  // namespace qkv::infer
