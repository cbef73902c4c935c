// The paper's language-model tables (Table 4 at 300M, Table 9 at 1.2B) for language-model runs:
// per experiment, model shape and variant, validation perplexity (mean ± std over runs), its
// change vs QKV, the KV cache, training perplexity, parameters and training tokens/s, with the
// paper's numbers beside ours, and the ranking by validation loss beside the paper's. A paper
// table declares the model shape it belongs to (its `model:`); runs of any other shape get no
// paper numbers, and a line says so.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "lab/report/table.h"

namespace qkv::report {

// True for a paper table of language-model results (its task column is "lm").
bool is_lm_table(const PaperTable& p);

// "20 layers, d_model 1024, 16 heads, FFN 4096, context 2048, vocab 50304".
std::string shape_text(const experiment::LmShape& s);
// The language-model paper table among `papers` whose model is `shape`; null for another shape
// or an unknown one (a result.json from before shapes were recorded).
const PaperTable* paper_table_for(const std::vector<PaperTable>& papers,
                                  const std::optional<experiment::LmShape>& shape);
// The line a table without paper numbers carries: which models the paper trained, and what
// these runs are.
std::string no_paper_note(const std::vector<PaperTable>& papers, const std::optional<experiment::LmShape>& shape);

// Perplexities and loss over the complete runs (NaN when every run diverged, train_ppl also
// when no run recorded a training loss); tokens/s over all.
struct LmRow {
  std::string variant;
  double ppl = 0, ppl_std = 0, loss = 0, tokens_per_s = 0, cache_reduction = 0;
  double train_ppl = 0;  // exp of the mean training loss over the last validation interval (result.h)
  int64_t params = 0;
  int64_t kv_bytes_per_token = 0;  // bf16
  int runs = 0;                    // complete runs
  int diverged = 0;                // runs that stopped as diverged (result.h)
};
struct LmTable {
  std::string experiment;
  std::string label;                         // the experiment, and what tells its shapes apart if it has several
  std::optional<experiment::LmShape> shape;  // none: the runs did not record it
  std::vector<LmRow> rows;                   // the paper's variant order first, then others
};

// One table per experiment and model shape among the language-model result rows (an experiment
// whose grid changes the shape, such as the context ablation, gets one per shape); `paper`
// orders the variants.
std::vector<LmTable> build_lm_tables(const std::vector<ResultRow>& results, const PaperTable* paper);
// The paper's perplexity change vs QKV of `variant`: as printed (dppl), else from its perplexities.
std::optional<double> paper_delta(const PaperTable& p, const std::string& variant);
// `note`, when given, goes under the caption (no_paper_note).
std::string lm_markdown(const LmTable& t, const PaperTable* paper, const std::string& note = "");
std::string lm_csv(const std::vector<LmTable>& tables, const PaperTable* paper);

}  // namespace qkv::report
