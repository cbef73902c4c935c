#include "lab/cli/bench_decode_run.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>

#include "lab/cli/device_option.h"
#include "lab/experiment/lm_run.h"
#include "lab/experiment/models.h"
#include "lab/infer/cache_quality.h"
#include "lab/infer/decode_bench.h"
#include "lab/infer/generate.h"
#include "lab/infer/run_model.h"
#include "lab/tasks/lm.h"
#include "tensor/format.h"

namespace qkv::cli {

std::vector<DType> parse_cache_dtypes(const std::string& list, const char* option) {
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
                      "' is not a KV-cache dtype: expected f32, bf16, f16 or int8");
    out.push_back(*d);
    begin = end + 1;
  }
  return out;
}

void bench_decode_run(const BenchDecodeRunOptions& o) {
  const experiment::LmRunFiles f = experiment::open_lm_run(o.run, "bench decode");
  experiment::LmConfig c = f.config;
  if (!o.data_root.empty()) c.data.root = o.data_root;
  const Device device = usable_device(o.device, "bench decode");
  const std::unique_ptr<nn::GPT> loaded = infer::load_run_model(f, c, device);
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

  std::printf(
      "%s (%s, %s) on %s: batch %lld, prompt %lld, %lld new tokens, cache of %lld positions; validation: "
      "%lld batches of %lld x %lld tokens\n\n",
      o.run.c_str(), nn::variant_name(f.run.variant).c_str(), f.checkpoint.filename().string().c_str(),
      device.str().c_str(), static_cast<long long>(o.batch), static_cast<long long>(prompt),
      static_cast<long long>(new_tokens), static_cast<long long>(context), static_cast<long long>(batches),
      static_cast<long long>(tb.batch), static_cast<long long>(tb.context));
  std::printf("| cache | bytes | prefill ms | decode tokens/s | val loss | val PPL | PPL vs %s |\n",
              dtype_short_name(o.dtypes.front()));
  std::printf("|---|---:|---:|---:|---:|---:|---:|\n");
  double base = NAN;
  for (DType dtype : o.dtypes) {
    const infer::DecodeBenchResult r = infer::bench_decode(model, o.batch, context, prompt, new_tokens, dtype);
    const infer::CacheQuality q = infer::cache_quality(model, val, batches, dtype);
    if (std::isnan(base)) base = q.perplexity;
    std::printf("| %s | %s | %.1f | %.1f | %.4f | %.3f | %+.3f%% |\n", dtype_short_name(dtype),
                with_commas(r.cache_bytes).c_str(), r.prefill_ms, r.decode_tokens_per_s, q.loss, q.perplexity,
                100 * (q.perplexity / base - 1));
    std::fflush(stdout);
  }
}

}  // namespace qkv::cli
