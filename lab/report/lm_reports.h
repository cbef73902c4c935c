// The language-model reports of an experiment file, one row per attention variant of its
// sweep, without training: parameter counts, multiply-accumulates of a forward pass (the paper's
// FLOPs table), and the KV cache — bytes per token and at a context, computed from the closed
// form and measured from the allocator after a real prefill into a cache of that size.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "lab/experiment/experiment.h"
#include "nn/models/gpt.h"
#include "tensor/format.h"

namespace qkv::report {

struct LmVariantModel {
  std::string variant;  // "QKV", "Q-K=V", "GQA-4", ...
  nn::GPTConfig config;
};
// The GPT of each variant in the experiment's sweep (first grid point), in sweep order.
std::vector<LmVariantModel> lm_variant_models(const experiment::Experiment& e);

std::string params_report(const std::vector<LmVariantModel>& models);
// The closed form per part and in total, beside the count from the forward's op calls.
std::string flops_report(const std::vector<LmVariantModel>& models, int64_t seq);
// One forward's multiply-accumulates (batch 1), counted from its op calls; no kernel runs.
int64_t counted_gpt_macs(const nn::GPTConfig& config, int64_t seq);

struct CacheRow {
  std::string variant;
  DType dtype = DType::bf16;              // the cache's storage (int8: with float32 row scales)
  int64_t bytes_per_token = 0;            // one sequence, all layers
  int64_t computed_bytes = 0;             // (per token x context + a linear-attention state) x batch
  std::optional<int64_t> measured_bytes;  // allocator delta after a real prefill
  double reduction = 0;                   // of computed_bytes vs the first row (QKV at the first dtype)
};
struct CacheOptions {
  int64_t context = 2048, batch = 1, prefill = 16;
  std::vector<DType> dtypes{DType::f32, DType::bf16, DType::i8};  // a row per variant and dtype, in this order
  bool measure = true;
  Device device = kCPU;  // where the measuring prefill runs
};
// One row per variant and dtype (variant-major); one model per variant is built when measuring.
std::vector<CacheRow> cache_rows(const std::vector<LmVariantModel>& models, const CacheOptions& o);
std::string cache_report(const std::vector<CacheRow>& rows, const CacheOptions& o);

}  // namespace qkv::report
