// The K=V conversion study (lab/studies/convert_study.h) on a tiny GPT over Markov tokens: the
// source trains, is converted, fine-tuned and set against K=V from scratch with the same tokens;
// a second call reuses every finished step and gives the same table; a file of several runs or
// of another task family is refused naming the file.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>

#include "lab/studies/convert_study.h"
#include "tests/support/captured_log.h"
#include "tests/support/error_checks.h"
#include "tests/support/test_support.h"
#include "tests/support/token_data.h"

using namespace qkv;
namespace fs = std::filesystem;

namespace {

const std::string kSource = QKV_SOURCE_DIR;

std::vector<std::string> tiny_study(const fs::path& tokens) {
  std::vector<std::string> o = test::tiny_lm_overrides(tokens, 20);
  o.insert(o.end(), {"convert.methods=[copy-k, svd]", "convert.calibration_batches=2", "convert.finetune_steps=6",
                     "convert.finetune_eval_every=3", "convert.finetune_warmup_steps=1"});
  return o;
}

}  // namespace

TEST_CASE("convert study: source, conversions, fine-tunes and K=V from scratch, all reused by a second call") {
  test::TempDir tmp("convert-study");
  const fs::path tokens = test::markov_token_dataset(tmp.path, 64);
  const auto e = experiment::load_experiment(kSource + "/experiments/lm/convert.yaml", "", tiny_study(tokens));
  const fs::path out = tmp.path / "runs";

  test::CapturedLog first;
  const report::ConvertStudy s = studies::run_convert_study(e, out, first.file());
  CHECK(s.source_variant == "QKV");
  CHECK(s.target_variant == "Q-K=V");
  CHECK(s.source_steps == 20);
  CHECK(s.finetune_steps == 6);
  CHECK(s.tokens_per_step == 4 * 8);
  REQUIRE(s.rows.size() == 2);
  for (const auto& row : s.rows) {
    CHECK(std::isfinite(row.converted_ppl));
    CHECK(std::isfinite(row.finetuned_ppl));
  }
  CHECK(std::isfinite(s.source_ppl));
  CHECK(std::isfinite(s.scratch_ppl));
  // The curves: the source, one per method (starting at the conversion), K=V from scratch.
  REQUIRE(s.curves.size() == 4);
  CHECK(s.curves[1].step.front() == 20);
  CHECK(s.curves[3].step.back() == 26);
  for (const char* run : {"shakespeare-convert/QKV/seed0", "shakespeare-convert-copy-k/Q-K=V/seed0",
                          "shakespeare-convert-svd-finetune/Q-K=V/seed0", "shakespeare-convert-scratch/Q-K=V/seed0"})
    CHECK_MESSAGE(fs::exists(out / run), run);
  CHECK(fs::exists(out / "shakespeare-convert" / "convert_study.md"));
  CHECK(fs::exists(out / "shakespeare-convert" / "convert_study.csv"));
  test::check_contains(first.text(), {"convert-study: training shakespeare-convert/QKV", "right after conversion"});

  test::CapturedLog again;
  const report::ConvertStudy t = studies::run_convert_study(e, out, again.file());
  CHECK(again.text().find("convert-study: training") == std::string::npos);
  test::check_contains(again.text(), {"is complete; reusing it", "is converted; reusing it"});
  CHECK(t.scratch_ppl == s.scratch_ppl);
  CHECK(t.rows[1].finetuned_ppl == s.rows[1].finetuned_ppl);
}

TEST_CASE("convert study: one source run of a language model, else an error naming the file") {
  test::TempDir tmp("convert-study-bad");
  const fs::path tokens = test::markov_token_dataset(tmp.path, 64);
  std::vector<std::string> two = tiny_study(tokens);
  two.push_back("sweep.variants=[QKV, GQA-2]");
  const auto e = experiment::load_experiment(kSource + "/experiments/lm/convert.yaml", "", two);
  test::check_contains(test::error_of<ValueError>([&] { studies::run_convert_study(e, tmp.path / "runs"); }),
                       {"convert.yaml", "describes 2 runs", "one source"});
  const auto synthetic = experiment::load_experiment(kSource + "/experiments/synthetic/copy.yaml");
  test::check_contains(test::error_of<ValueError>([&] { studies::run_convert_study(synthetic, tmp.path / "runs"); }),
                       {"copy.yaml", "task.kind lm"});
}
