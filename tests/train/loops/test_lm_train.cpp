// The language-model training loop on a tiny GPT over a generated token stream (a skewed
// Markov chain, so there is something to learn): a run interrupted after a checkpoint and
// resumed gives a loss curve bit-identical to an uninterrupted run; the newest K checkpoints
// are kept; a step whose gradient norm exceeds the threshold is made again on the next batches.
#include <doctest/doctest.h>

#include <algorithm>

#include "io/safetensors.h"
#include "tests/support/error_checks.h"
#include "tests/support/lm_optimizer.h"
#include "tests/support/test_support.h"
#include "tests/support/token_data.h"
#include "train/data/tokens/token_dataset.h"
#include "train/loops/lm_loop.h"

using namespace qkv;
using namespace qkv::loops;
using qkv::optim::CosineWarmup;
namespace fs = std::filesystem;

namespace {

constexpr int64_t kVocab = 64;

nn::GPTConfig tiny_gpt() {
  nn::GPTConfig c;
  c.vocab = kVocab;
  c.context = 16;
  c.layers = 2;
  c.dropout = 0.1;  // dropout masks must resume too
  c.attention.d_model = 16;
  c.attention.heads = 2;
  c.attention.sharing = nn::Sharing::q_kv;
  return c;
}

// Trains a fresh model in `dir` as a new process would: its own generator, model and batches.
LmTrainResult train_in(const fs::path& tokens, const fs::path& dir, bool resume, int64_t stop_after,
                       double skip_grad_norm = 0, Precision precision = Precision::fp32) {
  Generator gen(3);
  nn::GPT model(tiny_gpt(), &gen);
  data::TokenBatchOptions tb;
  tb.batch = 4;
  tb.context = 16;
  tb.seed = 11;
  data::TokenBatches train(tokens, "train", tb);
  tb.shuffle = false;
  data::TokenBatches val(tokens, "val", tb);
  CosineWarmup schedule(3e-3, 2, 12, 3e-4);
  LmTrainOptions o;
  o.steps = 12;
  o.grad_accum = 2;
  o.eval_every = 4;
  o.eval_batches = 2;
  o.keep_checkpoints = 2;
  o.log_every = 1;
  o.skip_grad_norm = skip_grad_norm;
  o.dir = dir;
  o.resume = resume;
  o.stop_after = stop_after;
  o.precision = precision;
  o.loss_scale_growth = 3;  // fp16: the scale doubles every third step, so resuming must restore it
  return train_lm(model, gen, *test::lm_adamw(model), train, val, schedule, o);
}

// The training loss and the validation loss by step, from metrics.jsonl's typed records.
std::vector<std::pair<int64_t, double>> train_curve(const fs::path& dir) {
  std::vector<std::pair<int64_t, double>> out;
  for (const LmStepRecord& r : records_of<LmStepRecord>(read_metrics(dir / "metrics.jsonl")))
    out.emplace_back(r.step, r.loss);
  return out;
}
std::vector<std::pair<int64_t, double>> val_curve(const fs::path& dir) {
  std::vector<std::pair<int64_t, double>> out;
  for (const EvalRecord& r : records_of<EvalRecord>(read_metrics(dir / "metrics.jsonl")))
    out.emplace_back(r.step, r.val_loss);
  return out;
}

}  // namespace

TEST_CASE("lm training: an interrupted and resumed run's loss curve is bit-identical to an uninterrupted one") {
  test::TempDir root("lm-resume");
  const fs::path tokens = test::markov_token_dataset(root.path, kVocab);
  const LmTrainResult whole = train_in(tokens, root.path / "whole", false, 0);
  CHECK(whole.finished);
  CHECK(whole.steps == 12);

  // Stopped after step 6: the newest checkpoint is step 4, so steps 5 and 6 are redone.
  const LmTrainResult first = train_in(tokens, root.path / "split", false, 6);
  CHECK_FALSE(first.finished);
  const LmTrainResult second = train_in(tokens, root.path / "split", true, 0);
  CHECK(second.resumed_from == 4);
  CHECK(second.finished);

  const auto a = train_curve(root.path / "whole"), b = train_curve(root.path / "split");
  REQUIRE(a.size() == 12);
  REQUIRE(b.size() == a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    CAPTURE(i);
    CHECK(a[i].first == b[i].first);
    CHECK(a[i].second == b[i].second);  // exact: same batches, dropout masks and updates
  }
  CHECK(val_curve(root.path / "whole") == val_curve(root.path / "split"));
  CHECK(a.back().second < a.front().second);  // it learns

  // Only the newest two checkpoints remain, each a model file and its state file.
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(root.path / "split" / "checkpoints"))
    names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  CHECK(names == std::vector<std::string>{"step_00000008.safetensors", "step_00000008.state.safetensors",
                                          "step_00000012.safetensors", "step_00000012.state.safetensors"});
  CHECK(latest_checkpoint(root.path / "split")->filename() == "step_00000012.safetensors");
}

TEST_CASE("lm training: a resumed fp16 run continues the loss scale and the curve of an uninterrupted one") {
  test::TempDir root("lm-resume-fp16");
  const fs::path tokens = test::markov_token_dataset(root.path, kVocab);
  const LmTrainResult whole = train_in(tokens, root.path / "whole", false, 0, 0, Precision::f16);
  CHECK(whole.finished);
  train_in(tokens, root.path / "split", false, 6, 0, Precision::f16);
  // The step-4 checkpoint holds a scale that has moved from a fresh run's (2^16, no good steps):
  // doubled after step 3 (or halved by an overflow).
  const fs::path step4 = root.path / "split" / "checkpoints" / "step_00000004.state.safetensors";
  const safetensors::Metadata m = safetensors::read_header(step4.string()).metadata;
  CHECK((m.at("loss_scale") != "65536" || m.at("loss_scale_good_steps") != "0"));
  const LmTrainResult second = train_in(tokens, root.path / "split", true, 0, 0, Precision::f16);
  CHECK(second.resumed_from == 4);
  CHECK(whole.loss_scale.scale > 0);
  CHECK(second.loss_scale == whole.loss_scale);
  CHECK(train_curve(root.path / "whole") == train_curve(root.path / "split"));
  CHECK(val_curve(root.path / "whole") == val_curve(root.path / "split"));
}

TEST_CASE("lm training: a step whose gradient norm exceeds the threshold is made again, within a bound") {
  test::TempDir root("lm-skip");
  const fs::path tokens = test::markov_token_dataset(root.path, kVocab);
  // Every step above the threshold: retried on fresh batches until too many in a row.
  const LmTrainResult r = train_in(tokens, root.path / "run", false, 0, 1e-9);
  REQUIRE(r.diverged);
  test::check_contains(r.diverged->reason, {"11 attempts in a row at step 1", "train.skip_grad_norm"});
  CHECK(r.steps == 0);
  CHECK(r.skipped_steps == 10);
  CHECK(r.evals.empty());

  // A threshold between the largest and the second largest norm of a run without one: the steps
  // before the largest are the same, that one is made again, and the run still makes its 12
  // updates.
  const LmTrainResult plain = train_in(tokens, root.path / "plain", false, 0);
  const auto lines = records_of<LmStepRecord>(read_metrics(root.path / "plain" / "metrics.jsonl"));
  REQUIRE(lines.size() == 12);
  std::vector<double> norms;
  for (const LmStepRecord& l : lines) norms.push_back(l.grad_norm);
  std::sort(norms.rbegin(), norms.rend());
  REQUIRE(norms[0] > norms[1]);
  const LmTrainResult retried = train_in(tokens, root.path / "retried", false, 0, (norms[0] + norms[1]) / 2);
  CHECK(retried.finished);
  CHECK(retried.steps == 12);
  CHECK(retried.skipped_steps >= 1);
  CHECK(plain.skipped_steps == 0);
}

TEST_CASE("lm training: resuming from optimizer state that does not fit names the state file") {
  test::TempDir root("lm-resume-bad-state");
  const fs::path tokens = test::markov_token_dataset(root.path, kVocab);
  train_in(tokens, root.path / "run", false, 6);  // leaves the checkpoint of step 4
  const fs::path state = root.path / "run" / "checkpoints" / "step_00000004.state.safetensors";
  REQUIRE(fs::exists(state));

  // The same state with the step counter under another name, as another optimizer would write it.
  safetensors::Metadata meta;
  std::vector<std::pair<std::string, Tensor>> renamed;
  for (auto& [name, t] : safetensors::load(state.string(), kCPU, &meta))
    renamed.emplace_back(name == "step" ? "decay.step" : name, t);
  safetensors::save(state.string(), renamed, meta);

  test::check_contains(test::error_of<ValueError>([&] { train_in(tokens, root.path / "run", true, 0); }),
                       {state.string(), "optimizer state does not fit", "'step'"});
}

// On a GPU every host read of a value waits for the device. A step reads its loss and gradient
// norm together, once (two micro-batches are accumulated on the device); an evaluation reads
// its mean loss once. Counted on the CPU, where the same loop code runs.
TEST_CASE("lm training: one host synchronisation per optimizer step") {
  test::TempDir root("lm-syncs");
  const fs::path tokens = test::markov_token_dataset(root.path, kVocab);
  const uint64_t before = host_sync_count();
  const LmTrainResult r = train_in(tokens, root.path / "run", false, 0);
  const uint64_t syncs = host_sync_count() - before;
  REQUIRE(r.steps == 12);
  REQUIRE(r.evals.size() == 3);
  CHECK(syncs == uint64_t(r.steps) + r.evals.size());
}
