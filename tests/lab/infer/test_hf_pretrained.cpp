// A pretrained GPT-2 made K=V: the fixture imported, token data prepared with its own tokenizer,
// then convert (svd, calibrated on that data, validation loss before and after) reads the
// imported run as it reads a trained one. An imported run has no data of its own: without
// --token-data the command says what to give.
#include <doctest/doctest.h>

#include <cmath>

#include "lab/experiment/lm_run.h"
#include "lab/infer/convert_run.h"
#include "lab/infer/hf/import.h"
#include "tests/support/error_checks.h"
#include "tests/support/test_support.h"
#include "train/data/tokens/prepare_dataset.h"

using namespace qkv;
namespace fs = std::filesystem;

TEST_CASE("hf pretrained: import then convert with token data prepared by the imported tokenizer") {
  test::TempDir tmp("hf-pretrained");
  infer::ImportRequest i;
  i.source = fs::path(QKV_SOURCE_DIR) / "tests" / "fixtures" / "hf_gpt2_tiny";
  i.out = tmp.path / "gpt2";
  infer::import_hf(i);

  std::string text;
  const std::string corpus = test::read_file(fs::path(QKV_SOURCE_DIR) / "tests" / "tokenizer" / "corpus.txt");
  for (int k = 0; k < 300; ++k) text += corpus;  // a validation batch of the default 512 x 32 tokens
  data::PrepareOptions p;
  p.inputs = {tmp.write("train.txt", text)};
  p.out = tmp.path / "tokens";
  p.tokenizer = i.out / "tokenizer";
  p.progress = false;
  const data::PrepareResult prepared = data::prepare_dataset(p, nullptr);
  CHECK(prepared.train.tokens > 10000);

  infer::ConvertRequest c;
  c.run = i.out;
  c.out = tmp.path / "gpt2-kv";
  c.calibration_batches = 2;
  test::check_contains(test::error_of<IOError>([&] { infer::convert_run(c); }),
                       {"convert", i.out.string(), "no token data of its own", "--token-data"});
  c.token_data = p.out.string();
  const infer::ConvertedRun converted = infer::convert_run(c);
  CHECK(nn::variant_name(converted.target_variant) == "Q-K=V");
  CHECK(std::isfinite(converted.source_val_loss));
  CHECK(std::isfinite(converted.val_loss));
  // Random weights, vocabulary 1000: both models are near the uniform loss, ln 1000.
  CHECK(std::abs(converted.source_val_loss - std::log(1000.0)) < 1.5);
  const experiment::LmRunFiles f = experiment::open_lm_run(c.out, "generate");
  CHECK(nn::variant_name(f.run.variant) == "Q-K=V");
}
