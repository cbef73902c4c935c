// The language-model loop against interruptions: the temporary file of a killed checkpoint write
// (today's or an earlier version's name) is never taken for a checkpoint, and tokens/s counts
// exactly the tokens trained since the last log line or validation, never tokens whose time was
// left out (the first line after a validation used to report about twice the true rate).
#include <doctest/doctest.h>

#include "io/atomic_file.h"
#include "tests/support/lm_optimizer.h"
#include "tests/support/test_support.h"
#include "tests/support/token_data.h"
#include "train/data/tokens/token_dataset.h"
#include "train/loops/lm_loop.h"
#include "train/loops/progress.h"

using namespace qkv;
using namespace qkv::loops;
namespace fs = std::filesystem;

namespace {

constexpr int64_t kVocab = 64, kBatch = 4, kContext = 16, kAccum = 2;
constexpr int64_t kStepTokens = kBatch * kContext * kAccum;

// A tiny GPT trained for `steps` steps in `dir`, as a fresh process would.
LmTrainResult train_in(const fs::path& tokens, const fs::path& dir, int64_t steps, int64_t log_every,
                       int64_t eval_every, bool resume = false, int64_t stop_after = 0) {
  nn::GPTConfig c;
  c.vocab = kVocab;
  c.context = kContext;
  c.layers = 1;
  c.attention.d_model = 16;
  c.attention.heads = 2;
  Generator gen(3);
  nn::GPT model(c, &gen);
  data::TokenBatchOptions tb;
  tb.batch = kBatch;
  tb.context = kContext;
  tb.seed = 11;
  data::TokenBatches train(tokens, "train", tb);
  tb.shuffle = false;
  data::TokenBatches val(tokens, "val", tb);
  optim::CosineWarmup schedule(3e-3, 2, steps, 3e-4);
  LmTrainOptions o;
  o.steps = steps;
  o.grad_accum = kAccum;
  o.eval_every = eval_every;
  o.eval_batches = 1;
  o.log_every = log_every;
  o.dir = dir;
  o.resume = resume;
  o.stop_after = stop_after;
  return train_lm(model, gen, *test::lm_adamw(model), train, val, schedule, o);
}

}  // namespace

TEST_CASE("lm checkpoints: the temporary file of a killed write is never taken for a checkpoint") {
  test::TempDir root("lm-temp");
  const fs::path tokens = test::markov_token_dataset(root.path, kVocab);
  const fs::path run = root.path / "run", ckpt = run / "checkpoints";
  train_in(tokens, run, 8, 4, 4);
  REQUIRE(checkpoint_steps(run) == std::vector<int64_t>{4, 8});

  // What a kill during the checkpoint of step 12 can leave: the model complete and the state file
  // half written, under this version's temporary name or an earlier version's.
  fs::copy_file(ckpt / "step_00000008.safetensors", ckpt / "step_00000012.safetensors");
  test::write_file(temp_file_for(ckpt / "step_00000012.state.safetensors"), "half a state file");
  test::write_file(ckpt / "step_00000012.state.safetensors.tmp.4242", "half a state file");
  test::write_file(ckpt / "step_00000016.state.safetensors.part", "not a checkpoint either");
  CHECK(checkpoint_steps(run) == std::vector<int64_t>{4, 8});
  CHECK(latest_checkpoint(run) == ckpt / "step_00000008.safetensors");
  const auto loaded = load_latest_lm_checkpoint(run, kCPU);
  REQUIRE(loaded);
  CHECK(loaded->state.step == 8);

  // Resuming continues from step 8 and writes the real checkpoint of step 12.
  const LmTrainResult r = train_in(tokens, run, 12, 4, 4, true);
  CHECK(r.resumed_from == 8);
  CHECK(r.finished);
  CHECK(checkpoint_steps(run) == std::vector<int64_t>{8, 12});
}

TEST_CASE("throughput window: tokens and seconds since the last log line or validation") {
  using Clock = ThroughputWindow::Clock;
  const Clock::time_point t0{};
  auto at = [&](double s) {
    return t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
  };
  ThroughputWindow w(at(0));
  w.add(100);
  w.add(100);
  ThroughputWindow::Rate r = w.take(at(2));  // a log line after two steps of a second each
  CHECK(r.tokens == 200);
  CHECK(r.seconds == doctest::Approx(2.0));
  CHECK(r.per_second() == doctest::Approx(100.0));
  w.add(100);
  w.restart(at(13));  // a validation from 3 s to 13 s: the step before it leaves with its time
  w.add(100);
  r = w.take(at(14));
  CHECK(r.tokens == 100);
  CHECK(r.seconds == doctest::Approx(1.0));
  CHECK(r.per_second() == doctest::Approx(100.0));  // the true rate, not 200
  CHECK(w.take(at(14)).per_second() == 0);          // an empty window reports nothing
}

TEST_CASE("lm training: the tokens/s after a validation counts only the steps since it") {
  test::TempDir root("lm-rate");
  const fs::path tokens = test::markov_token_dataset(root.path, kVocab);
  // Log lines at 4, 8, 12; validations at 6 and 12. The line at 8 counts steps 7 and 8 only.
  const LmTrainResult whole = train_in(tokens, root.path / "whole", 12, 4, 6);
  CHECK(whole.logged_tokens == std::vector<int64_t>{4 * kStepTokens, 2 * kStepTokens, 4 * kStepTokens});

  // A run resumed from the checkpoint of step 6 logs the same windows after it.
  train_in(tokens, root.path / "split", 12, 4, 6, false, 7);
  const LmTrainResult resumed = train_in(tokens, root.path / "split", 12, 4, 6, true);
  CHECK(resumed.resumed_from == 6);
  CHECK(resumed.logged_tokens == std::vector<int64_t>{2 * kStepTokens, 4 * kStepTokens});
}
