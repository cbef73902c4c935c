// The paper's Table 4 layout for language-model runs: per experiment and variant, validation
// perplexity (mean ± std over runs), its change vs QKV, the KV-cache reduction, parameters and
// training tokens/s, with the paper's numbers beside ours, and the ranking by validation loss
// beside the paper's.
#pragma once
#include <string>
#include <vector>

#include "lab/report/table.h"

namespace qkv::report {

// True for a paper table of language-model results (its task column is "lm").
bool is_lm_table(const PaperTable& p);

// Perplexity and loss over the complete runs (NaN when every run diverged); tokens/s over all.
struct LmRow {
  std::string variant;
  double ppl = 0, ppl_std = 0, loss = 0, tokens_per_s = 0, cache_reduction = 0;
  int64_t params = 0;
  int runs = 0;      // complete runs
  int diverged = 0;  // runs that stopped as diverged (result.h)
};
struct LmTable {
  std::string experiment;
  std::vector<LmRow> rows;  // the paper's variant order first, then others
};

// One table per experiment among the language-model result rows.
std::vector<LmTable> build_lm_tables(const std::vector<ResultRow>& results, const PaperTable* paper);
std::string lm_markdown(const LmTable& t, const PaperTable* paper);
std::string lm_csv(const std::vector<LmTable>& tables, const PaperTable* paper);

}  // namespace qkv::report
