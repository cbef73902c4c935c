// The sequence-length ablation: an experiment whose language-model runs trained at more than one
// context (model.context in its sweep grid) gets, per context, the validation perplexity of the
// baseline (QKV) and of the variant (Q-K=V), the gap PPL(variant) / PPL(baseline) - 1, and the
// paper's gap at that context beside ours (experiments/paper/ablation-context.yaml).
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "lab/experiment/result.h"

namespace qkv::report {

struct PaperAblation {
  std::string title;
  std::string baseline = "QKV", variant = "Q-K=V";
  std::map<int64_t, double> gap;  // context -> the paper's gap
  std::string note;               // what the paper says about the setting
};
// IOError naming the file and the key.
PaperAblation load_paper_ablation(const std::string& path);

struct AblationRow {
  int64_t context = 0;
  double baseline_ppl = NAN, variant_ppl = NAN;  // mean over complete runs; NaN: none
  int baseline_runs = 0, variant_runs = 0;
  std::optional<double> gap, paper_gap;
};
struct ContextAblation {
  std::string experiment;
  std::vector<AblationRow> rows;  // by context, ascending
};

// The context of a language-model row: its recorded model shape, else its grid point's
// model.context; none when neither says.
std::optional<int64_t> run_context(const experiment::ResultRow& r);

// One ablation per experiment (and shape apart from the context) run at two or more contexts.
// Without a paper ablation the baseline is QKV and the variant Q-K=V.
std::vector<ContextAblation> build_context_ablations(const std::vector<experiment::ResultRow>& results,
                                                     const PaperAblation* paper);
std::string ablation_markdown(const ContextAblation& a, const PaperAblation* paper);
std::string ablation_csv(const std::vector<ContextAblation>& all, const PaperAblation* paper);

}  // namespace qkv::report
