#include "lab/report/lm_pareto.h"

#include <algorithm>
#include <cmath>

#include "tensor/error.h"

namespace qkv::report {

Figure lm_pareto_figure(const std::vector<LmTable>& tables, const PaperTable* paper) {
  Figure f;
  f.title = "KV-cache reduction vs perplexity change, each against QKV";
  f.columns = 2;
  const Axis x{"KV-cache reduction vs QKV (%)", false, 0.0, 100.0}, y{"perplexity change vs QKV (%)", false, {}, {}};
  for (const LmTable& t : tables) {
    const auto base = std::find_if(t.rows.begin(), t.rows.end(), [](const LmRow& r) { return r.variant == "QKV"; });
    if (base == t.rows.end() || base->runs == 0) continue;
    LinePanel ours{cat("ours: ", t.label), x, y, {}};
    for (const LmRow& r : t.rows)
      if (r.runs > 0) ours.series.push_back({r.variant, {100 * r.cache_reduction}, {100 * (r.ppl / base->ppl - 1)}});
    f.lines.push_back(std::move(ours));
  }
  if (paper && !f.lines.empty()) {
    LinePanel theirs{cat("paper: ", paper->title), x, y, {}};
    for (const std::string& v : paper->variants) {
      const auto reduction = paper->at(v, "cache_reduction");
      const auto dppl = paper_delta(*paper, v);
      if (reduction && dppl) theirs.series.push_back({v, {100 * *reduction}, {100 * *dppl}});
    }
    if (!theirs.series.empty()) f.lines.push_back(std::move(theirs));
  }
  return f;
}

}  // namespace qkv::report
