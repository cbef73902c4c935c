// bench_decode: build, prefill, greedy decode, and the allocator's, the kernel's and the cache's
// byte counts. Each step's next tokens go to the host (as a sampler checking for end-of-text
// would), which also makes the timings wait for the device.
#include "lab/infer/decode_bench.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "autograd/grad_mode.h"
#include "lab/infer/static_decoder.h"
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

// Returns the blocks an earlier model left in the allocators' caches (and glibc's free heap) to
// the system, so that the peaks measured next count this model only.
void release_cached_memory(const Device& device) {
  empty_cache(device);
  if (device != kCPU) empty_cache(kCPU);
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}
// Before anything is built: the sizes must fit the cache and the model.
void check_sizes(const nn::GPTConfig& c, int64_t batch, int64_t context, int64_t prompt, int64_t new_tokens) {
  check<ValueError>(batch > 0 && prompt > 0 && new_tokens >= 0, "bench_decode: batch ", batch, " and prompt ", prompt,
                    " must be positive and new_tokens ", new_tokens, " non-negative");
  check<ValueError>(prompt + new_tokens <= context && context <= c.context, "bench_decode: prompt ", prompt, " + ",
                    new_tokens, " new tokens must fit the cache's ", context, " positions, at most the model's ",
                    c.context);
}
}  // namespace

std::optional<int64_t> peak_rss_bytes() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (!line.starts_with("VmHWM:")) continue;
    std::istringstream s(line.substr(6));
    int64_t kb = -1;
    std::string unit;
    if (s >> kb >> unit && kb >= 0 && unit == "kB") return kb * 1024;
    return std::nullopt;
  }
  return std::nullopt;
}

bool reset_peak_rss() {
  std::ofstream f("/proc/self/clear_refs");
  if (!f) return false;
  f << "5";  // 5: reset the peak resident set size to the current one (Linux 4.0+)
  f.flush();
  return bool(f);
}

DecodePrecision parse_decode_precision(const std::string& s) {
  if (s == "fp32" || s == "f32" || s == "float32") return DecodePrecision::fp32;
  if (s == "bf16" || s == "bfloat16") return DecodePrecision::bf16;
  throw ValueError(cat("--precision '", s, "': expected bf16 or fp32"));
}

DecodeDtypes decode_dtypes(DecodePrecision p, const Device& device) {
  DecodeDtypes d;
  if (p == DecodePrecision::fp32) {
    d.note = "fp32: weights and arithmetic in float32";
    return d;
  }
  if (device.is_cuda()) {
    d.weights = DType::bf16;
    d.note = "bf16: weights and activations in bfloat16 (float32 accumulation in the GEMMs, attention and norms)";
    return d;
  }
  d.note =
      "bf16 requested: the CPU keeps weights and arithmetic in float32 (the KV cache is stored as --cache-dtype "
      "says), so this is not the paper's all-bf16 setting";
  return d;
}

std::vector<DType> parse_cache_dtypes(const std::string& list, const std::string& option) {
  std::vector<DType> out;
  size_t begin = 0;
  while (begin <= list.size()) {
    const size_t end = std::min(list.find(',', begin), list.size());
    const std::string name = list.substr(begin, end - begin);
    std::optional<DType> d;
    try {
      d = parse_dtype(name);
    } catch (const DTypeError&) {}  // refused below, with the KV-cache dtypes listed
    check<ValueError>(d && kCacheDTypes.contains(*d), option, ": '", name,
                      "' is not a KV-cache dtype: expected a comma-separated list of f32, bf16, f16 and int8");
    check<ValueError>(std::find(out.begin(), out.end(), *d) == out.end(), option, ": '", name, "' is listed twice");
    out.push_back(*d);
    begin = end + 1;
  }
  return out;
}

DecodeBenchResult bench_decode(const nn::GPTConfig& c, int64_t batch, int64_t context, int64_t prompt,
                               int64_t new_tokens, DType cache_dtype, const Device& device, bool static_step,
                               DType weights) {
  check_sizes(c, batch, context, prompt, new_tokens);
  release_cached_memory(device);
  Generator gen(0);
  nn::GPT model(c, &gen);
  model.to(device);
  model.to(weights);
  model.eval();
  return bench_decode(model, batch, context, prompt, new_tokens, cache_dtype, static_step);
}

DecodeBenchResult bench_decode(const nn::GPT& model, int64_t batch, int64_t context, int64_t prompt, int64_t new_tokens,
                               DType cache_dtype, bool static_step) {
  const nn::GPTConfig& c = model.config();
  check_sizes(c, batch, context, prompt, new_tokens);
  NoGradGuard no_grad;
  const Device device = model.wte.weight.device();
  Generator gen(0);
  Tensor ids = cast(uniform({batch, prompt}, 0, double(c.vocab), DType::f64, &gen), DType::i64).to(device);

  reset_peak_memory(device);
  DecodeBenchResult r;
  r.rss_since_start = !reset_peak_rss();
  nn::KVCache cache = model.make_cache(batch, context, cache_dtype);
  r.cache_bytes = cache.bytes();
  r.cache_dtype = cache.dtype();
  r.weight_dtype = model.parameters().front().dtype();

  auto t0 = Clock::now();
  Tensor next = next_tokens(model.forward_cached(ids, cache));
  r.prefill_ms = 1e3 * seconds_since(t0);

  int64_t timed = new_tokens;
  if (static_step && new_tokens > 0) {
    StaticDecoder decoder(model, cache);
    next = next_tokens(decoder.step(next, prompt));  // the capture: not timed
    timed = new_tokens - 1;
    t0 = Clock::now();
    for (int64_t i = 1; i < new_tokens; ++i) next = next_tokens(decoder.step(next, prompt + i));
    r.graphed = decoder.graphed();
  } else {
    t0 = Clock::now();
    for (int64_t i = 0; i < new_tokens; ++i) next = next_tokens(model.forward_cached(next.to(device), cache));
  }
  const double decode_s = seconds_since(t0);
  r.decode_tokens_per_s = timed > 0 ? double(batch * timed) / decode_s : 0.0;
  r.peak_bytes = int64_t(memory_stats(device).peak);
  r.peak_rss_bytes = peak_rss_bytes();
  return r;
}

}  // namespace qkv::infer
