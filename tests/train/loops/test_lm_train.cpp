// The language-model training loop on a tiny GPT over real tokens (the first part of
// tiny-shakespeare, tokenized with GPT-2's BPE): a run interrupted after a checkpoint and
// resumed gives a loss curve bit-identical to an uninterrupted run; the newest K checkpoints
// are kept; a step whose gradient norm exceeds the threshold is skipped.
#include <doctest/doctest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/support/test_support.h"
#include "train/data/token_dataset.h"
#include "train/loops/lm_loop.h"

using namespace qkv;
using namespace qkv::loops;
using qkv::optim::CosineWarmup;
namespace fs = std::filesystem;

namespace {

// A prepared token folder from the first 40 KB of tiny-shakespeare.
fs::path tiny_dataset(const fs::path& root) {
  const fs::path text = test::data_dir() / "tinyshakespeare" / "input.txt";
  REQUIRE_MESSAGE(fs::exists(text), text.string(), " is missing (set QKV_DATA to the data folder)");
  std::ifstream in(text, std::ios::binary);
  std::string head(40000, '\0');
  in.read(head.data(), std::streamsize(head.size()));
  std::ofstream(root / "head.txt", std::ios::binary) << head;
  data::PrepareOptions p;
  p.inputs = {root / "head.txt"};
  p.out = root / "tokens";
  p.tokenizer = test::data_dir() / "gpt2-tokenizer";
  p.val_fraction = 0.2;
  p.progress = false;
  data::prepare_dataset(p, nullptr);
  return p.out;
}

nn::GPTConfig tiny_gpt() {
  nn::GPTConfig c;
  c.vocab = 50304;
  c.context = 16;
  c.layers = 2;
  c.dropout = 0.1;   // dropout masks must resume too
  c.attention.d_model = 16;
  c.attention.heads = 2;
  c.attention.sharing = nn::Sharing::q_kv;
  return c;
}

// Trains a fresh model in `dir` as a new process would: its own generator, model and batches.
LmTrainResult train_in(const fs::path& tokens, const fs::path& dir, bool resume, int64_t stop_after,
                       double skip_grad_norm = 0) {
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
  return train_lm(model, gen, train, val, schedule, o);
}

// step -> the record's loss (training) or val_loss (validation), parsed from metrics.jsonl.
std::vector<std::pair<int64_t, double>> curve(const fs::path& dir, const char* key) {
  std::vector<std::pair<int64_t, double>> out;
  std::ifstream f(dir / "metrics.jsonl");
  std::string line;
  while (std::getline(f, line)) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains(key)) out.emplace_back(j["step"].get<int64_t>(), j[key].get<double>());
  }
  return out;
}

}  // namespace

TEST_CASE("lm training: an interrupted and resumed run's loss curve is bit-identical to an uninterrupted one") {
  test::TempDir root("lm-resume");
  const fs::path tokens = tiny_dataset(root.path);
  const LmTrainResult whole = train_in(tokens, root.path / "whole", false, 0);
  CHECK(whole.finished);
  CHECK(whole.steps == 12);

  // Stopped after step 6: the newest checkpoint is step 4, so steps 5 and 6 are redone.
  const LmTrainResult first = train_in(tokens, root.path / "split", false, 6);
  CHECK_FALSE(first.finished);
  const LmTrainResult second = train_in(tokens, root.path / "split", true, 0);
  CHECK(second.resumed_from == 4);
  CHECK(second.finished);

  const auto a = curve(root.path / "whole", "loss"), b = curve(root.path / "split", "loss");
  REQUIRE(a.size() == 12);
  REQUIRE(b.size() == a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    CAPTURE(i);
    CHECK(a[i].first == b[i].first);
    CHECK(a[i].second == b[i].second);   // exact: same batches, dropout masks and updates
  }
  CHECK(curve(root.path / "whole", "val_loss") == curve(root.path / "split", "val_loss"));
  CHECK(a.back().second < a.front().second);   // it learns

  // Only the newest two checkpoints remain, each a model file and its state file.
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(root.path / "split" / "checkpoints")) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  CHECK(names == std::vector<std::string>{"step_00000008.safetensors", "step_00000008.state.safetensors",
                                          "step_00000012.safetensors", "step_00000012.state.safetensors"});
  CHECK(latest_checkpoint(root.path / "split")->filename() == "step_00000012.safetensors");
}

TEST_CASE("lm training: steps whose gradient norm exceeds the threshold are skipped") {
  test::TempDir root("lm-skip");
  const fs::path tokens = tiny_dataset(root.path);
  const LmTrainResult r = train_in(tokens, root.path / "run", false, 0, 1e-9);
  CHECK(r.skipped_steps == 12);
  const auto loss = curve(root.path / "run", "val_loss");
  REQUIRE(loss.size() == 3);
  CHECK(loss[0].second == loss[2].second);   // nothing was updated
}
