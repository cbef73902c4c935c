// The study's efficiency-quality trade-off: for each language-model table, every variant as a
// point at its KV-cache reduction vs QKV (x, %) and its perplexity change vs QKV (y, %), ours in
// one panel and the paper's in another (the same variant, the same colour). Variants further
// right save more cache; lower costs less perplexity.
#pragma once
#include <filesystem>
#include <vector>

#include "lab/report/lm_table.h"
#include "lab/report/plot.h"

namespace qkv::report {

// The figure of `tables` (those with a QKV row, which the changes are against), the paper's
// points from `paper` when given; empty (no line panels) when no table has a QKV row.
Figure lm_pareto_figure(const std::vector<LmTable>& tables, const PaperTable* paper);

}  // namespace qkv::report
