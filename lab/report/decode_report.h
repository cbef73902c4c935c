// The report of `qkvlab bench decode`: one row per variant (prefill, decode tokens/s, cache bytes,
// the allocator's peak and the process's peak RSS), then the variant-vs-baseline ratios of peak
// memory and decode throughput beside the paper's measured ranges
// (experiments/paper/decode.yaml: Q-K=V vs QKV at 1.2B on an A100 in bf16).
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace qkv::report {

struct PaperDecode {
  std::string title, setting;
  std::string baseline = "QKV", variant = "Q-K=V";
  std::pair<double, double> peak_memory_change{0, 0}, tokens_per_s_change{0, 0};  // low, high
};
// IOError naming the file and the key.
PaperDecode load_paper_decode(const std::string& path);

struct DecodeRow {
  std::string variant;
  double prefill_ms = 0, tokens_per_s = 0;
  int64_t cache_bytes = 0, peak_bytes = 0;
  std::optional<int64_t> peak_rss_bytes;
  bool rss_since_start = false;  // the peak could not be reset: it counts from the process's start
};

std::string decode_header();  // the Markdown table's head
std::string decode_row(const DecodeRow& r);
// What the peaks measure, then `variant` vs `baseline` (the paper's, else Q-K=V vs QKV): our
// relative changes of peak memory, peak RSS and decode tokens/s beside the paper's ranges.
std::string decode_comparison(const std::vector<DecodeRow>& rows, const PaperDecode* paper);

}  // namespace qkv::report
