#include "lab/studies/decode_study.h"

#include <algorithm>
#include <cmath>

#include "lab/experiment/lm_run.h"
#include "lab/infer/cache_quality.h"
#include "lab/infer/run_model.h"
#include "lab/tasks/lm.h"
#include "tensor/error.h"
#include "tensor/format.h"

namespace qkv::studies {

std::vector<std::vector<report::DecodeRow>> run_variant_decode_study(const VariantDecodeOptions& o, std::FILE* log) {
  check<ValueError>(o.prompt + o.new_tokens <= o.context, "bench decode: --prompt ", o.prompt, " + --new-tokens ",
                    o.new_tokens, " exceed --context ", o.context);
  check<ValueError>(!o.cache_dtypes.empty(), "bench decode: no KV-cache dtype given (--cache-dtype)");
  const infer::DecodeDtypes dts = infer::decode_dtypes(o.precision, o.device);
  std::fprintf(log, "decode on %s: batch %lld, prompt %lld, %lld new tokens, cache of %lld positions\nprecision %s\n",
               o.device.str().c_str(), static_cast<long long>(o.batch), static_cast<long long>(o.prompt),
               static_cast<long long>(o.new_tokens), static_cast<long long>(o.context), dts.note.c_str());
  std::vector<std::vector<report::DecodeRow>> tables;
  // The paper measured GPT-2-style models: a Llama-style one is not set beside its numbers.
  const bool llama = !o.models.empty() && o.models.front().config.attention.rope;
  const report::PaperDecode* paper = o.paper && !llama ? &*o.paper : nullptr;
  for (const DType cache : o.cache_dtypes) {
    std::fprintf(log, "\nKV cache %s\n\n%s", dtype_name(cache), report::decode_header().c_str());
    std::vector<report::DecodeRow>& rows = tables.emplace_back();
    DType weights = DType::f32;
    bool graphed = false;
    for (const auto& m : o.models) {
      nn::GPTConfig c = m.config;
      c.context = std::max(c.context, o.context);
      const infer::DecodeBenchResult r =
          infer::bench_decode(c, o.batch, o.context, o.prompt, o.new_tokens, cache, o.device, o.graph, dts.weights);
      weights = r.weight_dtype;
      graphed = r.graphed;
      rows.push_back({m.variant, r.prefill_ms, r.decode_tokens_per_s, r.cache_bytes, r.peak_bytes, r.peak_rss_bytes,
                      r.rss_since_start});
      std::fprintf(log, "%s", report::decode_row(rows.back()).c_str());
      std::fflush(log);
    }
    std::fprintf(log, "\nran: weights %s, KV cache %s%s\n", dtype_name(weights), dtype_name(cache),
                 !o.graph  ? ""
                 : graphed ? ", decode steps replayed as a CUDA graph"
                           : ", the static decode step (eager)");
    std::fprintf(log, "%s", report::decode_comparison(rows, paper).c_str());
  }
  if (llama)
    std::fprintf(log, "(no paper decode numbers: the paper measured GPT-2-style models, not the Llama block)\n");
  else if (!o.paper) std::fprintf(log, "(no paper decode numbers: %s not found; pass --paper)\n", o.paper_path.c_str());
  return tables;
}

std::vector<RunDecodeRow> run_trained_decode_study(const RunDecodeOptions& o, std::FILE* log) {
  check<ValueError>(!o.cache_dtypes.empty(), "bench decode: no KV-cache dtype given (--cache-dtype)");
  const experiment::LmRunFiles f = experiment::open_lm_run(o.run, "bench decode");
  experiment::LmConfig c = f.config;
  if (!o.data_root.empty()) c.data.root = o.data_root;
  const std::unique_ptr<nn::GPT> loaded = infer::load_run_model(f, c, o.device);
  const nn::GPT& model = *loaded;

  const int64_t context = o.context > 0 ? o.context : c.model.context;
  const int64_t new_tokens = std::min(o.new_tokens, context - 1);
  const int64_t prompt = o.prompt > 0 ? o.prompt : context - new_tokens;
  data::TokenBatchOptions tb;
  tb.batch = c.train.eval_batch_size;
  tb.context = c.model.context;
  tb.shuffle = false;
  data::TokenBatches val(tasks::run_token_folder(f, c, o.token_data, "bench decode"), "val", tb);
  const int64_t batches =
      std::min<int64_t>(o.eval_batches > 0 ? o.eval_batches : c.train.eval_batches, val.batches_per_epoch());

  std::fprintf(log,
               "%s (%s, %s) on %s: batch %lld, prompt %lld, %lld new tokens, cache of %lld positions; validation: "
               "%lld batches of %lld x %lld tokens\n\n",
               o.run.c_str(), nn::variant_name(f.run.variant).c_str(), f.checkpoint.filename().string().c_str(),
               o.device.str().c_str(), static_cast<long long>(o.batch), static_cast<long long>(prompt),
               static_cast<long long>(new_tokens), static_cast<long long>(context), static_cast<long long>(batches),
               static_cast<long long>(tb.batch), static_cast<long long>(tb.context));
  std::fprintf(log, "| cache | bytes | prefill ms | decode tokens/s | val loss | val PPL | PPL vs %s |\n",
               dtype_short_name(o.cache_dtypes.front()));
  std::fprintf(log, "|---|---:|---:|---:|---:|---:|---:|\n");
  std::vector<RunDecodeRow> rows;
  for (DType dtype : o.cache_dtypes) {
    const infer::DecodeBenchResult r = infer::bench_decode(model, o.batch, context, prompt, new_tokens, dtype);
    const infer::CacheQuality q = infer::cache_quality(model, val, batches, dtype);
    rows.push_back({dtype, r, q.loss, q.perplexity});
    std::fprintf(log, "| %s | %s | %.1f | %.1f | %.4f | %.3f | %+.3f%% |\n", dtype_short_name(dtype),
                 with_commas(r.cache_bytes).c_str(), r.prefill_ms, r.decode_tokens_per_s, q.loss, q.perplexity,
                 100 * (q.perplexity / rows.front().val_ppl - 1));
    std::fflush(log);
  }
  return rows;
}

}  // namespace qkv::studies
