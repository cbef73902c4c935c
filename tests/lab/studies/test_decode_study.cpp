// The decode studies (lab/studies/decode_study.h): per cache dtype a row per variant, the K=V
// cache half of QKV's and an int8 cache smaller than a float32 one; a trained run's perplexity
// through each cache, a bf16 cache within a hair of float32's.
#include <doctest/doctest.h>

#include <cmath>

#include "lab/studies/decode_study.h"
#include "lab/tasks/lm.h"
#include "lab/tasks/run_task.h"
#include "tests/support/captured_log.h"
#include "tests/support/error_checks.h"
#include "tests/support/test_support.h"
#include "tests/support/token_data.h"

using namespace qkv;
namespace fs = std::filesystem;

namespace {

report::LmVariantModel tiny_model(const std::string& variant, nn::Sharing sharing) {
  nn::GPTConfig c;
  c.vocab = 61;
  c.context = 16;
  c.layers = 1;
  c.dropout = 0.0;
  c.attention.d_model = 16;
  c.attention.heads = 2;
  c.attention.sharing = sharing;
  c.attention.causal = true;
  return {variant, c};
}

}  // namespace

TEST_CASE("decode study of variants: a table per cache dtype, K=V's cache half of QKV's") {
  studies::VariantDecodeOptions o;
  o.models = {tiny_model("QKV", nn::Sharing::qkv), tiny_model("Q-K=V", nn::Sharing::q_kv)};
  o.context = 16;
  o.prompt = 4;
  o.new_tokens = 3;
  o.cache_dtypes = {DType::f32, DType::i8};
  o.paper_path = "nowhere/decode.yaml";
  test::CapturedLog log;
  const auto tables = studies::run_variant_decode_study(o, log.file());
  REQUIRE(tables.size() == 2);
  for (const auto& rows : tables) {
    REQUIRE(rows.size() == 2);
    CHECK(rows[0].variant == "QKV");
    CHECK(rows[1].cache_bytes * 2 == rows[0].cache_bytes);
    CHECK(rows[1].tokens_per_s > 0);
  }
  CHECK(tables[1][0].cache_bytes < tables[0][0].cache_bytes);
  test::check_contains(log.text(),
                       {"KV cache float32", "KV cache int8", "Q-K=V vs QKV", "nowhere/decode.yaml not found"});

  o.new_tokens = 13;
  test::check_contains(test::error_of<ValueError>([&] { studies::run_variant_decode_study(o, log.file()); }),
                       {"--prompt 4 + --new-tokens 13 exceed --context 16"});
}

TEST_CASE("decode study of a trained run: validation perplexity through each cache dtype") {
  test::TempDir tmp("decode-study");
  const fs::path tokens = test::markov_token_dataset(tmp.path, 64);
  std::vector<std::string> tiny = test::tiny_lm_overrides(tokens, 20);
  tiny.push_back("sweep.variants=[QKV]");
  const auto e =
      experiment::load_experiment(std::string(QKV_SOURCE_DIR) + "/experiments/lm/shakespeare.yaml", "", tiny);
  REQUIRE(e.runs.size() == 1);
  const experiment::RunDir dir(tmp.path / "runs", e.runs[0]);
  dir.start(e.runs[0].config);
  tasks::run_lm(e.runs[0], dir, tmp.path / "runs", false);

  studies::RunDecodeOptions o;
  o.run = dir.path().string();
  o.cache_dtypes = {DType::f32, DType::bf16};
  test::CapturedLog log;
  const auto rows = studies::run_trained_decode_study(o, log.file());
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].cache_dtype == DType::f32);
  CHECK(std::isfinite(rows[0].val_ppl));
  CHECK(rows[1].val_ppl == doctest::Approx(rows[0].val_ppl).epsilon(0.01));
  CHECK(rows[1].speed.cache_bytes * 2 == rows[0].speed.cache_bytes);
  test::check_contains(log.text(), {"| f32 |", "| bf16 |", "+0.000%"});
}
