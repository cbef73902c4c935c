// The decode studies behind `qkvlab bench decode`:
//   - of an experiment file's variants, with random weights: per KV-cache dtype, a row per
//     variant (prefill, decode tokens/s, cache bytes, the allocator's and the process's peaks),
//     then the variant-vs-QKV ratios beside the paper's measured ranges (report/decode_report.h);
//   - of a trained run: per KV-cache dtype, its decode speed and what the storage costs in
//     validation perplexity through the cache (infer/cache_quality.h), packed windows of the
//     run's context from the start of its validation split.
#pragma once
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "lab/infer/decode_bench.h"
#include "lab/report/decode_report.h"
#include "lab/report/lm_reports.h"
#include "tensor/device.h"

namespace qkv::studies {

struct VariantDecodeOptions {
  std::vector<report::LmVariantModel> models;
  int64_t batch = 1, context = 512, prompt = 128, new_tokens = 32;
  std::vector<DType> cache_dtypes;
  infer::DecodePrecision precision = infer::DecodePrecision::fp32;
  Device device = kCPU;
  bool graph = false;  // the static decode step, replayed as a CUDA graph on a GPU
  std::optional<report::PaperDecode> paper;
  std::string paper_path;  // where the paper's numbers were looked for (said when missing)
};

// One table per cache dtype; returns its rows, per dtype in order.
std::vector<std::vector<report::DecodeRow>> run_variant_decode_study(const VariantDecodeOptions& o,
                                                                     std::FILE* log = stdout);

struct RunDecodeOptions {
  std::string run, data_root, token_data;  // data_root, token_data: overrides of the run's
  Device device = kCPU;
  std::vector<DType> cache_dtypes;
  int64_t batch = 1, context = 0, prompt = 0, new_tokens = 32, eval_batches = 0;  // 0: from the run
};

struct RunDecodeRow {
  DType cache_dtype;
  infer::DecodeBenchResult speed;
  double val_loss = 0, val_ppl = 0;
};

// A row per cache dtype, the perplexity change against the first.
std::vector<RunDecodeRow> run_trained_decode_study(const RunDecodeOptions& o, std::FILE* log = stdout);

}  // namespace qkv::studies
