// Decoding benchmark of the language model (nn::GPT over an nn::KVCache): prefill time, greedy
// decoding throughput, the cache's bytes, the device allocator's peak and the process's peak
// resident memory, for the inference side of the study (K=V variants halve the cache, GQA/MQA
// shrink it further).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "nn/models/gpt.h"

namespace qkv::infer {

struct DecodeBenchResult {
  double prefill_ms = 0;           // the prompt's forward pass over the cache, all sequences
  double decode_tokens_per_s = 0;  // tokens generated per second, summed over the batch
  int64_t cache_bytes = 0;         // KVCache::bytes()
  int64_t peak_bytes = 0;          // the device allocator's peak: weights, cache, activations
  // The process's peak resident set (VmHWM) over the same span; none where /proc cannot tell.
  // rss_since_start: the kernel would not reset the peak, so it counts from the process's start.
  std::optional<int64_t> peak_rss_bytes;
  bool rss_since_start = false;
  DType cache_dtype = DType::f32, weight_dtype = DType::f32;  // the storage actually used
  bool graphed = false;  // the decode steps replayed a CUDA graph (static_decoder.h)
};

// Builds the GPT on `device` (random N(0, 0.02) weights), prefills `prompt` tokens for `batch`
// sequences into a KV cache of `context` positions stored as `cache_dtype`, then decodes
// `new_tokens` tokens one at a time (greedy), under no_grad, in eval mode. Peak bytes from the
// device allocator and peak RSS from the kernel, both reset once the model is built (cached
// allocator blocks are returned first, so an earlier model's memory does not count); cache
// bytes from KVCache::bytes(). Weights are cast to `weights` (float32 by default). Needs prompt >= 1 and
// prompt + new_tokens <= context <= c.context. `static_step`: decode through StaticDecoder
// (GPT::decode_step; a CUDA graph on a GPU), whose first step (the capture) is not timed.
DecodeBenchResult bench_decode(const nn::GPTConfig& c, int64_t batch, int64_t context, int64_t prompt,
                               int64_t new_tokens, DType cache_dtype, const Device& device = kCPU,
                               bool static_step = false, DType weights = DType::f32);
// The same on a given model (a trained run's weights), on its device, in eval mode; the prompt
// is random token ids below the model's vocabulary. Peaks are reset first but the model's
// weights count in them.
DecodeBenchResult bench_decode(const nn::GPT& model, int64_t batch, int64_t context, int64_t prompt, int64_t new_tokens,
                               DType cache_dtype, bool static_step = false);

// The KV-cache storages a command compares (`--cache-dtype`, a comma-separated list): "f32,bf16,int8"
// -> those dtypes in order; a ValueError naming `option` and the valid names for another. Every
// command that takes the option has this default.
inline constexpr const char* kDefaultCacheDTypes = "f32,bf16,int8";
std::vector<DType> parse_cache_dtypes(const std::string& list, const std::string& option);

// `--precision`: the weights' and activations' dtype. bf16 runs the decode step in bfloat16 on a
// GPU (every op of it has a 16-bit CUDA kernel); the CPU keeps float32; `note` says which ran.
// The cache's storage is --cache-dtype's either way.
enum class DecodePrecision { fp32, bf16 };
struct DecodeDtypes {
  DType weights = DType::f32;
  std::string note;  // what ran, in words
};
DecodePrecision parse_decode_precision(const std::string& s);  // ValueError naming --precision
DecodeDtypes decode_dtypes(DecodePrecision p, const Device& device = kCPU);

// The process's peak resident set in bytes (VmHWM of /proc/self/status); none where unreadable.
std::optional<int64_t> peak_rss_bytes();
// Resets that peak to the current resident set (/proc/self/clear_refs); false where refused.
bool reset_peak_rss();

}  // namespace qkv::infer
