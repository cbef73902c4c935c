// Decoding benchmark of the language model (nn::GPT over an nn::KVCache): prefill time, greedy
// decoding throughput, the cache's bytes and the device allocator's peak, for the inference
// side of the study (K=V variants halve the cache, GQA/MQA shrink it further).
#pragma once
#include <cstdint>

#include "nn/models/gpt.h"

namespace qkv::infer {

struct DecodeBenchResult {
  double prefill_ms = 0;           // the prompt's forward pass over the cache, all sequences
  double decode_tokens_per_s = 0;  // tokens generated per second, summed over the batch
  int64_t cache_bytes = 0;         // KVCache::bytes()
  int64_t peak_bytes = 0;          // the device allocator's peak: weights, cache, activations
};

// Builds the GPT on `device` (random N(0, 0.02) weights), prefills `prompt` tokens for `batch`
// sequences into a KV cache of `context` positions stored as `cache_dtype`, then decodes
// `new_tokens` tokens one at a time (greedy), under no_grad, in eval mode. Peak bytes from the
// device allocator (its peak is reset once the model is built), cache bytes from
// KVCache::bytes(). Needs prompt >= 1 and prompt + new_tokens <= context <= c.context.
DecodeBenchResult bench_decode(const nn::GPTConfig& c, int64_t batch, int64_t context, int64_t prompt,
                               int64_t new_tokens, DType cache_dtype, const Device& device = kCPU);

}  // namespace qkv::infer
