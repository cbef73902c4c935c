#include "lab/report/lm_reports.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <set>
#include <sstream>

#include "autograd/grad_mode.h"
#include "autograd/op_macs.h"
#include "lab/experiment/models.h"
#include "lab/report/number_text.h"
#include "tensor/allocator.h"

namespace qkv::report {

std::vector<LmVariantModel> lm_variant_models(const experiment::Experiment& e) {
  check<ValueError>(e.config.kind() == experiment::TaskKind::lm, e.path, ": task.kind is ",
                    experiment::enum_name(e.config.kind()), ", expected lm (a language-model experiment)");
  std::vector<LmVariantModel> out;
  std::set<std::string> seen;
  for (const auto& run : e.runs) {
    const std::string name = nn::variant_name(run.variant);
    if (seen.insert(name).second)
      out.push_back({name, experiment::gpt_config(run.config.as<experiment::LmConfig>(), run.variant)});
  }
  return out;
}

namespace {
// The op count beside the closed form: "=" when they agree, else the count.
std::string counted_text(int64_t closed_form, int64_t counted) {
  return counted == closed_form ? "=" : fmt("%.2f (differs)", double(counted) / 1e9);
}
}  // namespace

std::string params_report(const std::vector<LmVariantModel>& models) {
  std::ostringstream s;
  s << "| variant | parameters | attention per layer | vs QKV |\n|---|---:|---:|---:|\n";
  const double base = models.empty() ? 1 : double(nn::gpt_parameter_count(models.front().config));
  for (const auto& m : models) {
    const int64_t total = nn::gpt_parameter_count(m.config);
    const int64_t attention = nn::gpt_attention_parameter_count(m.config);
    s << "| " << m.variant << " | " << with_commas(total) << " | " << with_commas(attention) << " | "
      << percent_2dp(double(total) / base - 1) << " |\n";
  }
  return s.str();
}

int64_t counted_gpt_macs(const nn::GPTConfig& config, int64_t seq) {
  NoGradGuard no_grad;
  std::unique_ptr<nn::GPT> model;
  autograd::trace_op_shapes([&] { model = std::make_unique<nn::GPT>(config); });  // no initialization runs
  model->eval();
  return autograd::count_macs([&] { model->forward(zeros({1, seq}, DType::i64)); }).total();
}

std::string flops_report(const std::vector<LmVariantModel>& models, int64_t seq) {
  std::ostringstream s;
  s << "multiply-accumulates of one forward pass, sequence " << seq << ", batch 1 (GMACs); counted: the same "
    << "from the forward's op calls (autograd/op_macs.h), a check on the closed form\n\n"
    << "| variant | projections | scores+mixing | output | MLP | LM head | total | vs QKV | counted |\n"
    << "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  const double base = models.empty() ? 1 : double(nn::gpt_macs(models.front().config, seq).total());
  auto g = [](int64_t x) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f", double(x) / 1e9);
    return std::string(buf);
  };
  for (const auto& m : models) {
    const nn::GPTMacs c = nn::gpt_macs(m.config, seq);
    s << "| " << m.variant << " | " << g(c.projections) << " | " << g(c.attention) << " | " << g(c.output) << " | "
      << g(c.mlp) << " | " << g(c.head) << " | " << g(c.total()) << " | " << percent_2dp(double(c.total()) / base - 1)
      << " | " << counted_text(c.total(), counted_gpt_macs(m.config, seq)) << " |\n";
  }
  return s.str();
}

std::vector<CacheRow> cache_rows(const std::vector<LmVariantModel>& models, const CacheOptions& o) {
  check<ValueError>(o.context > 0 && o.batch > 0 && o.prefill > 0,
                    "cache: context, batch and prefill must be positive");
  check<ValueError>(!o.dtypes.empty(), "cache: no cache dtype given");
  std::vector<CacheRow> rows;
  for (const auto& m : models) {
    nn::AttentionConfig a = m.config.attention;
    a.causal = true;
    std::optional<nn::GPT> model;
    Generator gen(0);
    if (o.measure) {
      nn::GPTConfig c = m.config;
      c.context = std::max(c.context, o.context);  // positions for the whole cache
      model.emplace(c, &gen);
      model->to(o.device);
      model->eval();
    }
    for (DType dtype : o.dtypes) {
      CacheRow r;
      r.variant = m.variant;
      r.dtype = dtype;
      r.bytes_per_token = nn::KVCache::bytes_per_token(a, m.config.layers, dtype);
      r.computed_bytes =
          (r.bytes_per_token * o.context + nn::KVCache::bytes_per_sequence(a, m.config.layers)) * o.batch;
      if (model) {
        NoGradGuard no_grad;
        Tensor prompt = zeros({o.batch, std::min(o.prefill, o.context)}, {DType::i64, o.device});
        model->prepare_rotary(o.context);  // the model's, not the cache's
        const size_t before = memory_stats(o.device).current;
        nn::KVCache cache = model->make_cache(o.batch, o.context, dtype);
        model->forward_cached(prompt, cache);  // a real prefill; its temporaries are gone after it
        r.measured_bytes = int64_t(memory_stats(o.device).current - before);
      }
      r.reduction = rows.empty() ? 0.0 : 1.0 - double(r.computed_bytes) / double(rows.front().computed_bytes);
      rows.push_back(r);
    }
  }
  return rows;
}

std::string cache_report(const std::vector<CacheRow>& rows, const CacheOptions& o) {
  std::ostringstream s;
  std::string dtypes;
  for (DType d : o.dtypes)
    dtypes += cat(dtypes.empty() ? "" : ", ", dtype_name(d), d == DType::i8 ? " (row scales)" : "");
  const std::string base = rows.empty() ? "" : cat(rows.front().variant, " ", dtype_short_name(rows.front().dtype));
  s << "KV cache, " << dtypes << ", batch " << o.batch << ", context " << o.context << " tokens\n\n"
    << "| variant | dtype | bytes/token | bytes at " << o.context << " | measured | reduction vs " << base
    << " |\n|---|---|---:|---:|---:|---:|\n";
  for (const auto& r : rows)
    s << "| " << r.variant << " | " << dtype_short_name(r.dtype) << " | " << with_commas(r.bytes_per_token) << " | "
      << with_commas(r.computed_bytes) << " | "
      << (r.measured_bytes ? with_commas(*r.measured_bytes) : std::string("–")) << " | " << percent_2dp(r.reduction)
      << " |\n";
  if (rows.size() > 1) {
    const auto smallest = std::min_element(rows.begin(), rows.end(), [](const CacheRow& a, const CacheRow& b) {
      return a.computed_bytes < b.computed_bytes;
    });
    char ratio[32];
    std::snprintf(ratio, sizeof ratio, "%.1fx", double(rows.front().computed_bytes) / double(smallest->computed_bytes));
    s << "\nsmallest: " << smallest->variant << " " << dtype_short_name(smallest->dtype) << ", " << ratio
      << " less than " << base << "\n";
  }
  return s.str();
}

}  // namespace qkv::report
