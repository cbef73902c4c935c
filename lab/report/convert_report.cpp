#include "lab/report/convert_report.h"

#include <cmath>

#include "io/atomic_file.h"
#include "lab/report/number_text.h"
#include "tensor/format.h"

namespace qkv::report {

namespace {

std::string ppl(double x) { return std::isfinite(x) ? fmt("%.2f", x) : "–"; }
std::string csv_number(double x) { return std::isfinite(x) ? fmt("%.6g", x) : ""; }

}  // namespace

std::string convert_study_markdown(const ConvertStudy& s) {
  const int64_t total = s.source_steps + s.finetune_steps;
  std::string md = cat("# Converting ", s.source_variant, " to ", s.target_variant, ": ", s.experiment, "\n\n");
  md += cat("Validation perplexity. The source trained ", s.source_steps, " steps; each converted model is fine-tuned ",
            s.finetune_steps, " steps; the ", s.target_variant, " model from scratch trained ", total,
            " steps, the same ", with_commas(total * s.tokens_per_step), " tokens (", with_commas(s.tokens_per_step),
            " a step). The svd fit read ", with_commas(s.calibration_tokens),
            " training tokens. Fit error: the relative error of what the converted layers' scores and outputs see, "
            "mean over layers.\n\n");
  md += cat("| method | fit error | ", s.source_variant, " before | after conversion | after ", s.finetune_steps,
            " fine-tune steps | ", s.target_variant, " from scratch (", total, " steps) |\n");
  md += "|---|---|---|---|---|---|\n";
  for (const ConvertStudyRow& r : s.rows)
    md += cat("| ", r.method, " | ", std::isfinite(r.fit_error) ? fmt("%.4f", r.fit_error) : "–", " | ",
              ppl(s.source_ppl), " | ", ppl(r.converted_ppl), " | ", ppl(r.finetuned_ppl), " | ", ppl(s.scratch_ppl),
              " |\n");
  return md;
}

void write_convert_study_csv(const ConvertStudy& s, const std::filesystem::path& file) {
  write_file_atomically(file.string(), [&](std::ostream& os) {
    os << "method,fit_error,source_ppl,converted_ppl,finetuned_ppl,scratch_ppl\n";
    for (const ConvertStudyRow& r : s.rows)
      os << r.method << ',' << csv_number(r.fit_error) << ',' << csv_number(s.source_ppl) << ','
         << csv_number(r.converted_ppl) << ',' << csv_number(r.finetuned_ppl) << ',' << csv_number(s.scratch_ppl)
         << '\n';
  });
}

Figure convert_study_figure(const ConvertStudy& s) {
  Figure f;
  f.title = cat(s.experiment, ": ", s.source_variant, " converted to ", s.target_variant);
  LinePanel whole{"the whole training",
                  Axis{"optimizer steps since the source's start"},
                  Axis{"validation perplexity", true},
                  {}};
  for (const ConvertCurve& c : s.curves) whole.series.push_back(Series{c.label, c.step, c.ppl});
  LinePanel window = whole;
  window.title = "the fine-tune window";
  window.y.log = false;  // a narrow range: a linear axis shows the differences
  window.x.min = double(s.source_steps);
  window.x.max = double(s.source_steps + s.finetune_steps);
  window.series.clear();
  for (const ConvertCurve& c : s.curves) {  // the points inside it only, so the y range fits them
    Series kept{c.label, {}, {}};
    for (size_t i = 0; i < c.step.size(); ++i)
      if (c.step[i] >= double(s.source_steps)) {
        kept.x.push_back(c.step[i]);
        kept.y.push_back(c.ppl[i]);
      }
    if (!kept.x.empty()) window.series.push_back(kept);
  }
  f.lines = {whole, window};
  return f;
}

}  // namespace qkv::report
