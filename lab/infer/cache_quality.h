// What a KV cache's storage costs in quality: the validation loss of a trained GPT whose
// attention reads its keys and values back from a cache of a given dtype (int8 rows with their
// scales, bf16, float32), each batch prefilled through GPT::forward_cached into a fresh cache.
// With a float32 cache this is the training loop's validation loss on the same batches.
#pragma once
#include <cstdint>

#include "nn/models/gpt.h"
#include "train/data/tokens/token_batches.h"

namespace qkv::infer {

struct CacheQuality {
  double loss = 0;        // mean next-token cross-entropy over the targets scored
  double perplexity = 0;  // exp(loss)
  int64_t tokens = 0;     // targets scored (ignored targets are not)
};

// The first `batches` batches of `val` (read from its start; the cursor is put back after),
// under no_grad, on the model's device. The model should be in eval mode.
CacheQuality cache_quality(const nn::GPT& model, data::TokenBatches& val, int64_t batches, DType cache_dtype);

}  // namespace qkv::infer
