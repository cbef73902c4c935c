// The conversion study's report (`qkvlab convert-study`): per method, the validation perplexity
// of the source, of the converted model right after conversion and after the fine-tune, beside
// the K=V model trained from scratch on the same total tokens, as markdown and CSV; and the
// validation curves of every model over the training steps each has seen.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "lab/report/plot.h"

namespace qkv::report {

struct ConvertStudyRow {
  std::string method;
  double fit_error = 0;  // mean over layers of convert.h's relative error (NaN: not measured)
  double converted_ppl = 0, finetuned_ppl = 0;
};

// A validation curve: perplexity after `step` optimizer steps counted from the start of the
// source's training (a fine-tune's step s is source_steps + s).
struct ConvertCurve {
  std::string label;
  std::vector<double> step, ppl;
};

struct ConvertStudy {
  std::string experiment, source_variant, target_variant;
  int64_t source_steps = 0, finetune_steps = 0, tokens_per_step = 0, calibration_tokens = 0;
  double source_ppl = 0, scratch_ppl = 0;
  std::vector<ConvertStudyRow> rows;
  std::vector<ConvertCurve> curves;
};

std::string convert_study_markdown(const ConvertStudy& s);
// One row per method: method, fit_error, source_ppl, converted_ppl, finetuned_ppl, scratch_ppl.
void write_convert_study_csv(const ConvertStudy& s, const std::filesystem::path& file);
// Two panels: the whole of training, and the fine-tune window.
Figure convert_study_figure(const ConvertStudy& s);

}  // namespace qkv::report
