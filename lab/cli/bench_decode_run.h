// `qkvlab bench decode --run RUN`: decoding with a trained run's weights, once per KV-cache
// dtype, with what each storage costs in validation perplexity (lab/infer/cache_quality.h).
#pragma once
#include <string>
#include <vector>

#include "tensor/dtype.h"

namespace qkv::cli {

struct BenchDecodeRunOptions {
  std::string run, data_root, token_data, device = "cpu";
  std::vector<DType> dtypes{DType::f32, DType::bf16, DType::i8};
  int64_t batch = 1, context = 0, prompt = 0, new_tokens = 32, eval_batches = 0;  // 0: from the run
};

// "bf16,int8" -> the KV-cache dtypes in order; ValueError naming `option` for another dtype.
std::vector<DType> parse_cache_dtypes(const std::string& list, const char* option);

// Prints per dtype: cache bytes, prefill ms, decode tokens/s, validation loss and perplexity
// through the cache (packed windows of the run's context from the start of its validation
// split: the run's own validation for lm.sampling packed), and the perplexity change against
// the first dtype.
void bench_decode_run(const BenchDecodeRunOptions& o);

}  // namespace qkv::cli
