// The conversion study's report (lab/report/convert_report.h): the table holds every method's
// perplexities beside the source's and the from-scratch model's, and the fine-tune panel of the
// figure keeps the points from the conversion on.
#include <doctest/doctest.h>

#include <cmath>

#include "lab/report/convert_report.h"
#include "tests/support/error_checks.h"
#include "tests/support/test_support.h"

using namespace qkv;

namespace {
report::ConvertStudy study() {
  report::ConvertStudy s;
  s.experiment = "shakespeare-convert";
  s.source_variant = "QKV";
  s.target_variant = "Q-K=V";
  s.source_steps = 500;
  s.finetune_steps = 100;
  s.tokens_per_step = 512;
  s.calibration_tokens = 8192;
  s.source_ppl = 201.546;
  s.scratch_ppl = 187.48;
  s.rows = {{"copy-k", 1.003, 237.436, 211.18}, {"svd", NAN, 201.5561, NAN}};
  s.curves = {{"QKV (source)", {100, 500}, {450, 201.5}},
              {"svd, fine-tuned", {500, 520, 600}, {201.6, 205, 199}},
              {"Q-K=V from scratch", {100, 600}, {470, 187.5}}};
  return s;
}
}  // namespace

TEST_CASE("convert report: the table and its CSV hold each method's perplexities, '–' where none") {
  const report::ConvertStudy s = study();
  const std::string md = report::convert_study_markdown(s);
  test::check_contains(md, {"Converting QKV to Q-K=V", "307,200 tokens", "8,192 training tokens",
                            "| copy-k | 1.0030 | 201.55 | 237.44 | 211.18 | 187.48 |",
                            "| svd | – | 201.55 | 201.56 | – | 187.48 |", "after 100 fine-tune steps",
                            "from scratch (600 steps)"});
  test::TempDir dir;
  report::write_convert_study_csv(s, dir.path / "s.csv");
  test::check_contains(test::read_file(dir.path / "s.csv"),
                       {"method,fit_error,source_ppl,converted_ppl,finetuned_ppl,scratch_ppl\n",
                        "copy-k,1.003,201.546,237.436,211.18,187.48\n", "svd,,201.546,201.556,,187.48\n"});
}

TEST_CASE("convert report: the figure's fine-tune panel keeps the points from the source's last step on") {
  const report::Figure f = report::convert_study_figure(study());
  REQUIRE(f.lines.size() == 2);
  CHECK(f.lines[0].series.size() == 3);
  CHECK(f.lines[0].y.log);
  const report::LinePanel& window = f.lines[1];
  CHECK(window.x.min == 500);
  CHECK(window.x.max == 600);
  CHECK_FALSE(window.y.log);
  REQUIRE(window.series.size() == 3);
  CHECK(window.series[0].x == std::vector<double>{500});
  CHECK(window.series[1].x == std::vector<double>{500, 520, 600});
  CHECK(window.series[2].x == std::vector<double>{600});
  CHECK(window.series[2].y == std::vector<double>{187.5});
}
