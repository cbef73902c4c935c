#include "lab/report/decode_report.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "lab/report/number_text.h"
#include "tensor/error.h"
#include "tensor/format.h"

namespace qkv::report {

PaperDecode load_paper_decode(const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) { throw IOError(cat(path, ": ", e.what())); }
  check<IOError>(root.IsMap(), path, ": expected a map with peak_memory_change and decode_tokens_per_s_change");
  PaperDecode d;
  for (auto [key, out] : {std::pair<const char*, std::string*>{"title", &d.title},
                          {"setting", &d.setting},
                          {"baseline", &d.baseline},
                          {"variant", &d.variant}}) {
    if (!root[key]) continue;
    check<IOError>(root[key].IsScalar(), path, ": '", key, "' must be text");
    *out = root[key].Scalar();
  }
  auto range = [&](const char* key) {
    const YAML::Node n = root[key];
    check<IOError>(n && n.IsSequence() && n.size() == 2, path, ": '", key,
                   "' must be [low, high], the paper's range of the relative change");
    std::pair<double, double> r;
    try {
      r = {n[0].as<double>(), n[1].as<double>()};
    } catch (const YAML::Exception&) { throw IOError(cat(path, ": '", key, "' must hold two numbers")); }
    check<IOError>(std::isfinite(r.first) && std::isfinite(r.second) && r.first <= r.second, path, ": '", key,
                   "' must be two finite numbers, low first");
    return r;
  };
  d.peak_memory_change = range("peak_memory_change");
  d.tokens_per_s_change = range("decode_tokens_per_s_change");
  return d;
}

namespace {
std::string rss_text(const DecodeRow& r) {
  if (!r.peak_rss_bytes) return "–";
  return with_commas(*r.peak_rss_bytes) + (r.rss_since_start ? " (since start)" : "");
}
const DecodeRow* find(const std::vector<DecodeRow>& rows, const std::string& v) {
  for (const auto& r : rows)
    if (r.variant == v) return &r;
  return nullptr;
}
}  // namespace

std::string decode_header() {
  return "| variant | prefill ms | decode tokens/s | cache bytes | peak bytes | peak RSS bytes |\n"
         "|---|---:|---:|---:|---:|---:|\n";
}

std::string decode_row(const DecodeRow& r) {
  return cat("| ", r.variant, " | ", fmt("%.1f", r.prefill_ms), " | ", fmt("%.1f", r.tokens_per_s), " | ",
             with_commas(r.cache_bytes), " | ", with_commas(r.peak_bytes), " | ", rss_text(r), " |\n");
}

std::string decode_comparison(const std::vector<DecodeRow>& rows, const PaperDecode* paper) {
  std::ostringstream s;
  s << "\npeak bytes: the allocator's peak from the cache's allocation to the last decoded token (weights, cache, "
       "activations); peak RSS: the process's peak resident memory (VmHWM) over the same span, on the host.\n";
  if (std::any_of(rows.begin(), rows.end(), [](const DecodeRow& r) { return r.rss_since_start; }))
    s << "The kernel would not reset the peak RSS (/proc/self/clear_refs), so it counts from the process's start.\n";
  const std::string base_name = paper ? paper->baseline : "QKV", var_name = paper ? paper->variant : "Q-K=V";
  const DecodeRow *base = find(rows, base_name), *var = find(rows, var_name);
  if (!base || !var) {
    s << "\nno " << var_name << " vs " << base_name << " ratios: the sweep does not hold both variants\n";
    return s.str();
  }
  auto change = [](double ours, double theirs) {
    return theirs > 0 && std::isfinite(ours) ? signed_percent(ours / theirs - 1) : std::string("–");
  };
  auto range = [&](std::pair<double, double> PaperDecode::*field) {
    if (!paper) return std::string("–");
    const auto& r = paper->*field;
    return cat(signed_percent(r.first), " to ", signed_percent(r.second));
  };
  s << "\n"
    << var_name << " vs " << base_name << ", relative change (ours; the paper"
    << (paper && !paper->setting.empty() ? cat(": ", paper->setting) : std::string()) << ")\n\n"
    << "| measure | ours | paper |\n|---|---:|---:|\n"
    << "| peak memory (allocator) | " << change(double(var->peak_bytes), double(base->peak_bytes)) << " | "
    << range(&PaperDecode::peak_memory_change) << " |\n"
    << "| peak RSS | "
    << (var->peak_rss_bytes && base->peak_rss_bytes && !var->rss_since_start
            ? change(double(*var->peak_rss_bytes), double(*base->peak_rss_bytes))
            : std::string("–"))
    << " | – |\n"
    << "| decode tokens/s | " << change(var->tokens_per_s, base->tokens_per_s) << " | "
    << range(&PaperDecode::tokens_per_s_change) << " |\n"
    << "| KV cache bytes | " << change(double(var->cache_bytes), double(base->cache_bytes)) << " | – |\n";
  return s.str();
}

}  // namespace qkv::report
