// Text generation from a GPT: prefill the prompt into a KV cache, then sample one token at a
// time (temperature, top-k, a seeded Philox stream) until the requested count, the model's
// context or the end-of-text token. Weights loaded for inference are checked to be finite
// first: a checkpoint with a NaN or inf would only sample garbage.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "nn/models/gpt.h"

namespace qkv::infer {

struct SamplingOptions {
  double temperature = 1.0;  // 0: greedy
  int64_t top_k = 0;         // 0: the whole vocabulary
  int64_t vocab_limit = 0;   // sample only ids below this (the tokenizer's vocabulary); 0: all
  uint64_t seed = 0;
};

// Refuses weights holding a NaN or inf: IOError naming `file` (where they were loaded from), the
// first such tensor and how many of its elements are not finite.
void check_finite_weights(const nn::Module& model, const std::string& file);

// The next token from the logits [V] of one position.
int64_t sample_token(const Tensor& logits, const SamplingOptions& o, Generator& gen);

// Continues `prompt` (non-empty) by up to `max_new` tokens, calling `emit` with each as it is
// drawn; stops early at `stop_token` (emitted) or the context. Returns the new tokens.
std::vector<int64_t> generate(const nn::GPT& model, const std::vector<int64_t>& prompt, int64_t max_new,
                              const SamplingOptions& o, int64_t stop_token = -1,
                              const std::function<void(int64_t)>& emit = {});

}  // namespace qkv::infer
