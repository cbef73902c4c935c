// `qkvlab convert` on a real run folder (lab/infer/convert_run.h): a tiny QKV GPT trained a few
// steps on a token folder made here is converted; the converted folder is a run folder that
// open_lm_run reads, that `qkvlab run` neither continues nor deletes, and that a run names in
// model.init_from to start from exactly those weights (its first validation loss is the
// converted model's). Bad requests fail naming the flag.
#include <doctest/doctest.h>

#include <cmath>

#include "lab/experiment/experiment.h"
#include "lab/infer/convert_run.h"
#include "lab/tasks/lm.h"
#include "lab/tasks/run_task.h"
#include "tests/support/error_checks.h"
#include "tests/support/test_support.h"
#include "tests/support/token_data.h"

using namespace qkv;
using namespace qkv::experiment;
namespace fs = std::filesystem;

namespace {

const std::string kShakespeare = std::string(QKV_SOURCE_DIR) + "/experiments/lm/shakespeare.yaml";

// The shipped file shrunk to a GPT that trains in a fraction of a second on the Markov tokens.
std::vector<std::string> tiny_run(const fs::path& root, const fs::path& tokens) {
  std::vector<std::string> o = test::tiny_lm_overrides(tokens, 30);
  o.insert(o.end(), {"data.root=" + root.string(), "sweep.variants=[QKV]"});
  return o;
}

ResultRow train(const Experiment& e, const fs::path& out) {
  REQUIRE(e.runs.size() == 1);
  const RunDir dir(out, e.runs[0]);
  dir.start(e.runs[0].config);
  return tasks::run_lm(e.runs[0], dir, out, false);
}

}  // namespace

TEST_CASE("convert run: the converted folder is a run that generate/analyze read and model.init_from starts from") {
  test::TempDir tmp("convert-run");
  const fs::path tokens = test::markov_token_dataset(tmp.path, 64);
  const Experiment source = load_experiment(kShakespeare, "", tiny_run(tmp.path, tokens));
  train(source, tmp.path / "runs");
  const fs::path source_run = tmp.path / "runs" / "shakespeare" / "QKV" / "seed0";

  infer::ConvertRequest r;
  r.run = source_run;
  r.out = tmp.path / "converted" / "shakespeare" / "Q-K=V" / "seed0";
  r.method = ConvertMethod::svd;
  r.calibration_batches = 2;
  const infer::ConvertedRun c = infer::convert_run(r);
  CHECK(c.calibration_tokens == 2 * 4 * 8);
  CHECK(c.source_step == 30);
  CHECK(nn::variant_name(c.target_variant) == "Q-K=V");
  CHECK(c.layer_error.size() == 2);
  CHECK(std::isfinite(c.source_val_loss));
  CHECK(std::isfinite(c.val_loss));

  // A run folder: its config describes one Q-K=V run on the source's token folder.
  const LmRunFiles f = open_lm_run(r.out, "generate");
  CHECK(nn::variant_name(f.run.variant) == "Q-K=V");
  CHECK(f.checkpoint == c.checkpoint);
  CHECK(fs::path(f.config.lm.tokens) == fs::absolute(tokens).lexically_normal());
  CHECK(f.config.lm.text.empty());
  const infer::ConvertedRun back = infer::read_converted(r.out);
  CHECK(back.val_loss == c.val_loss);
  CHECK(back.source_val_loss == c.source_val_loss);
  CHECK(back.layer_error == c.layer_error);
  CHECK(back.calibration_tokens == c.calibration_tokens);
  CHECK(back.calibration_batches == 2);
  CHECK(back.checkpoint == c.checkpoint);

  // `qkvlab run` does not take it for an unfinished run, with --resume or --restart.
  const RunDir as_run(tmp.path / "converted", f.run);
  CHECK(as_run.path() == r.out);
  for (const bool resume : {true, false})
    test::check_contains(test::error_of<ValueError>([&] { as_run.settle_checkpoints(resume, !resume, nullptr); }),
                         {r.out.string(), "convert.json", "model.init_from"});
  CHECK(fs::exists(c.checkpoint));

  // Fine-tuning from it: with a negligible learning rate the first validation is the converted
  // model's own loss, on the same batches.
  const Experiment tune = load_experiment((r.out / "config.yaml").string(), "",
                                          {"model.init_from=" + r.out.string(), "optim.lr=1e-12", "schedule.min_lr=0",
                                           "schedule.warmup_steps=0", "train.steps=1", "train.eval_every=1"});
  const ResultRow row = train(tune, tmp.path / "tune");
  REQUIRE(row.lm());
  REQUIRE(row.lm()->evals.size() == 1);
  CHECK(row.lm()->evals[0].val_loss == doctest::Approx(c.val_loss).epsilon(1e-6));
  // ... and without model.init_from it starts from random weights, somewhere else.
  const Experiment scratch = load_experiment((r.out / "config.yaml").string(), "",
                                             {"optim.lr=1e-12", "schedule.min_lr=0", "schedule.warmup_steps=0",
                                              "train.steps=1", "train.eval_every=1"});
  CHECK(std::abs(train(scratch, tmp.path / "scratch").lm()->val_loss - c.val_loss) > 1e-3);
}

TEST_CASE("convert run: bad requests and bad model.init_from values name the flag or key") {
  test::TempDir tmp("convert-errors");
  const fs::path tokens = test::markov_token_dataset(tmp.path, 64);
  train(load_experiment(kShakespeare, "", tiny_run(tmp.path, tokens)), tmp.path / "runs");
  infer::ConvertRequest r;
  r.run = tmp.path / "runs" / "shakespeare" / "QKV" / "seed0";
  r.out = tmp.path / "out";
  r.calibration_batches = 1;
  r.evaluate = false;

  r.to = "QKV";
  test::check_contains(test::error_of<ValueError>([&] { infer::convert_run(r); }), {"--to QKV", "not a K=V"});
  r.to = "Q-GQA-2";
  test::check_contains(test::error_of<ValueError>([&] { infer::convert_run(r); }), {"--to Q-GQA-2", "QKV", "Q-K=V"});
  r.to = "Q-K=V";
  infer::convert_run(r);
  test::check_contains(test::error_of<IOError>([&] { infer::convert_run(r); }), {"--out", r.out.string()});
  r.run = tmp.path / "nothing";
  test::check_contains(test::error_of<IOError>([&] { infer::convert_run(r); }), {"convert", "nothing"});
  // A converted model is not a source.
  r.run = tmp.path / "out";
  r.out = tmp.path / "out2";
  test::check_contains(test::error_of<ValueError>([&] { infer::convert_run(r); }), {"Q-K=V", "QKV, GQA-g, MQA"});

  // model.init_from: a path that is not there, a folder without a checkpoint, and weights of
  // another shape (the QKV run's for a Q-K=V model), each naming the key and the file.
  auto overrides = tiny_run(tmp.path, tokens);
  overrides.push_back("sweep.variants=[Q-K=V]");
  overrides.push_back("model.init_from=" + (tmp.path / "missing").string());
  const Experiment missing = load_experiment(kShakespeare, "", overrides);
  test::check_contains(test::error_of<IOError>([&] { tasks::check_inputs(missing.config); }),
                       {"model.init_from", "missing", "no such file or folder"});
  overrides.back() = "model.init_from=" + tokens.string();
  test::check_contains(test::error_of<IOError>([&] {
                         tasks::check_lm_inputs(load_experiment(kShakespeare, "", overrides).config.as<LmConfig>());
                       }),
                       {"model.init_from", "no checkpoint"});
  overrides.back() = "model.init_from=" + (tmp.path / "runs" / "shakespeare" / "QKV" / "seed0").string();
  const Experiment wrong = load_experiment(kShakespeare, "", overrides);
  test::check_contains(test::error_of<IOError>([&] { train(wrong, tmp.path / "wrong"); }),
                       {"model.init_from", "step_00000030.safetensors", "blocks.0.attn.kv.weight"});
}
