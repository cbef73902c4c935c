#include "lab/report/lm_reports.h"

#include <cstdio>
#include <set>
#include <sstream>

#include "autograd/grad_mode.h"
#include "lab/experiment/models.h"
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
std::string percent(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f%%", 100 * x);
  return buf;
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
      << percent(double(total) / base - 1) << " |\n";
  }
  return s.str();
}

std::string flops_report(const std::vector<LmVariantModel>& models, int64_t seq) {
  std::ostringstream s;
  s << "multiply-accumulates of one forward pass, sequence " << seq << ", batch 1 (GMACs)\n\n"
    << "| variant | projections | scores+mixing | output | MLP | LM head | total | vs QKV |\n"
    << "|---|---:|---:|---:|---:|---:|---:|---:|\n";
  const double base = models.empty() ? 1 : double(nn::gpt_macs(models.front().config, seq).total());
  auto g = [](int64_t x) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f", double(x) / 1e9);
    return std::string(buf);
  };
  for (const auto& m : models) {
    const nn::GPTMacs c = nn::gpt_macs(m.config, seq);
    s << "| " << m.variant << " | " << g(c.projections) << " | " << g(c.attention) << " | " << g(c.output) << " | "
      << g(c.mlp) << " | " << g(c.head) << " | " << g(c.total()) << " | " << percent(double(c.total()) / base - 1)
      << " |\n";
  }
  return s.str();
}

std::vector<CacheRow> cache_rows(const std::vector<LmVariantModel>& models, const CacheOptions& o) {
  check<ValueError>(o.context > 0 && o.batch > 0 && o.prefill > 0,
                    "cache: context, batch and prefill must be positive");
  std::vector<CacheRow> rows;
  for (const auto& m : models) {
    CacheRow r;
    r.variant = m.variant;
    nn::AttentionConfig a = m.config.attention;
    a.causal = true;
    r.bytes_per_token = nn::KVCache::bytes_per_token(a, m.config.layers, o.dtype);
    r.computed_bytes = r.bytes_per_token * o.batch * o.context;
    if (o.measure) {
      nn::GPTConfig c = m.config;
      c.context = std::max(c.context, o.context);  // positions for the whole cache
      Generator gen(0);
      nn::GPT model(c, &gen);
      model.to(o.device);
      model.eval();
      NoGradGuard no_grad;
      Tensor prompt = zeros({o.batch, std::min(o.prefill, o.context)}, {DType::i64, o.device});
      const size_t before = memory_stats(o.device).current;
      nn::KVCache cache = model.make_cache(o.batch, o.context, o.dtype);
      model.forward_cached(prompt, cache);  // a real prefill; its temporaries are gone after it
      r.measured_bytes = int64_t(memory_stats(o.device).current - before);
    }
    r.reduction = rows.empty() ? 0.0 : 1.0 - double(r.bytes_per_token) / double(rows.front().bytes_per_token);
    rows.push_back(r);
  }
  return rows;
}

std::string cache_report(const std::vector<CacheRow>& rows, const CacheOptions& o) {
  std::ostringstream s;
  s << "KV cache, " << dtype_name(o.dtype) << ", batch " << o.batch << ", context " << o.context << " tokens\n\n"
    << "| variant | bytes/token | bytes at " << o.context << " | measured | reduction vs "
    << (rows.empty() ? "" : rows.front().variant) << " |\n|---|---:|---:|---:|---:|\n";
  for (const auto& r : rows)
    s << "| " << r.variant << " | " << with_commas(r.bytes_per_token) << " | " << with_commas(r.computed_bytes) << " | "
      << (r.measured_bytes ? with_commas(*r.measured_bytes) : std::string("–")) << " | " << percent(r.reduction)
      << " |\n";
  return s.str();
}

}  // namespace qkv::report
