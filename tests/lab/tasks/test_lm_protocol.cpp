// The official language-model protocol at the experiment level: the paper's LM files carry it
// (official sampling, validation on the first 10M tokens of the val split, decay on every
// parameter, the grad-norm skip, bf16) with a source on every setting, other files keep the
// defaults, the keys' rules, and a run end to end: lm.val_text as the val split, official
// sampling, and result.json recording the precision asked for and the one used.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "lab/experiment/experiment.h"
#include "lab/experiment/result.h"
#include "lab/tasks/lm.h"
#include "tests/support/byte_tokenizer.h"
#include "tests/support/error_checks.h"
#include "tests/support/test_support.h"
#include "train/data/tokens/prepare_dataset.h"

using namespace qkv;
using namespace qkv::experiment;
namespace fs = std::filesystem;

namespace {

const std::string kLmDir = std::string(QKV_SOURCE_DIR) + "/experiments/lm/";

std::string config_error(const std::function<void()>& f) { return test::error_of<ConfigError>(f); }

// Every `key: value` line of the settings sections names where the value comes from.
void check_sources(const std::string& path) {
  std::ifstream in(path);
  std::string line, section;
  int settings = 0;
  static const std::regex top(R"(^([a-z_]+):\s*(#.*)?$)"), setting(R"(^  [a-z_0-9]+:\s*\S.*$)");
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_match(line, m, top)) section = m[1];
    if (section == "task" || section == "data" || section == "scales" || !std::regex_match(line, setting)) continue;
    ++settings;
    INFO(path, ": ", line);
    CHECK((line.find("# paper") != std::string::npos || line.find("# official code") != std::string::npos ||
           line.find("# ours") != std::string::npos ||
           line.find("# bf16 autocast: official code") != std::string::npos ||
           line.find("kind: gpt") != std::string::npos));
  }
  CHECK(settings > 20);
}

}  // namespace

TEST_CASE("lm protocol: the paper's LM files follow the official code, every setting with its source") {
  struct Paper {
    const char* file;
    int eval_every, steps;
  };
  // 10B tokens over a step's batch x accumulation x 2048 tokens, rounded down (official code).
  for (const Paper& p : {Paper{"gpt-300m.yaml", 200, 4238}, Paper{"gpt-1.2b.yaml", 500, 8477}}) {
    CAPTURE(p.file);
    const Experiment e = load_experiment(kLmDir + p.file, "paper");
    const LmConfig& c = e.config.as<LmConfig>();
    CHECK(c.lm.sampling == LmSamplingName::official);
    CHECK(c.optim.decay == optim::DecayRule::all);
    CHECK(c.optim.weight_decay == 0.1);
    CHECK(c.train.skip_grad_norm == 100);
    CHECK(c.train.precision == loops::Precision::bf16);
    CHECK(c.train.eval_every == p.eval_every);
    CHECK(c.train.steps == p.steps);
    CHECK(c.train.steps == 10'000'000'000 / (int64_t(c.train.batch_size) * c.train.grad_accum * c.model.context));
    // The first 10M tokens of the val split, in whole batches of the micro-batch size.
    const int64_t batch_tokens = int64_t(c.train.eval_batch_size) * c.model.context;
    CHECK(c.train.eval_batch_size == c.train.batch_size);
    CHECK(c.train.eval_batches * batch_tokens <= 10'000'000);
    CHECK((c.train.eval_batches + 1) * batch_tokens > 10'000'000);
    const std::string protocol = tasks::lm_protocol(c);
    test::check_contains(protocol,
                         {cat(p.steps, " steps of "), "official", cat(c.model.context - 1, " targets per row"),
                          "padding counted",
                          cat("first ", c.train.eval_batches, " batches of ", c.train.eval_batch_size),
                          cat("every ", p.eval_every, " steps"), "all parameters", "> 100", "bf16", "precision bf16"});
    check_sources(kLmDir + p.file);
  }
  // The CPU-sized file keeps the defaults: packed windows, decay on matrices, fp32.
  const Experiment shakespeare = load_experiment(kLmDir + "shakespeare.yaml", "smoke");
  const LmConfig& s = shakespeare.config.as<LmConfig>();
  CHECK(s.lm.sampling == LmSamplingName::packed);
  CHECK(s.optim.decay == optim::DecayRule::matrices);
  CHECK(s.train.precision == loops::Precision::fp32);
  test::check_contains(tasks::lm_protocol(s), {"packed", "matrices", "precision fp32"});
}

TEST_CASE("lm protocol: the keys' rules name the key") {
  const std::string lm = "name: l\ntask:\n  kind: lm\nlm:\n  tokens: prepared\noptim:\n  name: adamw\n";
  test::check_contains(config_error([&] { config_from_yaml(lm + "  decay: some\n"); }), {"optim.decay", "matrices"});
  const Config ok = config_from_yaml(lm + "  decay: all\ntrain:\n  precision: bf16\n");
  CHECK(ok.as<LmConfig>().optim.decay == optim::DecayRule::all);
  test::check_contains(config_error([&] { config_from_yaml(lm + "train:\n  precision: fp8\n"); }),
                       {"train.precision", "fp32", "bf16", "fp16"});
  CHECK(config_from_yaml(lm + "train:\n  precision: fp16\n").loop().precision == loops::Precision::f16);
  // lm.val_text goes with lm.text: a prepared folder has its own val split.
  test::check_contains(config_error([] {
                         config_from_yaml("name: l\ntask:\n  kind: lm\nlm:\n  tokens: p\n  val_text: [v.txt]\n");
                       }),
                       {"lm.val_text", "lm.text"});
  // train.precision is every family's; optim.decay the language models' only.
  const Config syn = config_from_yaml("name: s\ntrain:\n  precision: bf16\n");
  CHECK(syn.loop().precision == loops::Precision::bf16);
  test::check_contains(config_error([] { config_from_yaml("name: s\noptim:\n  decay: all\n"); }),
                       {"optim.decay", "lm"});
}

TEST_CASE("lm protocol: a run with validation files, official sampling and bf16 records the precision used") {
  test::TempDir tmp("lm-protocol-run");
  test::byte_tokenizer(tmp.path / "tok");
  std::string text, val;
  for (int d = 0; d < 30; ++d) text += "the quick brown fox jumps over the lazy dog. ";
  for (int d = 0; d < 6; ++d) val += "{\"text\": \"doc " + std::string(size_t(d + 1), 'v') + "\"}\n";
  tmp.write("train.txt", text);
  tmp.write("val.jsonl", val);
  const Experiment e = load_experiment(kLmDir + "shakespeare.yaml", "",
                                       {"data.root=" + tmp.path.string(),
                                        "lm.text=[train.txt]",
                                        "lm.val_text=[val.jsonl]",
                                        "lm.tokenizer=tok",
                                        "lm.sampling=official",
                                        "optim.decay=all",
                                        "train.precision=bf16",
                                        "model.vocab=320",
                                        "model.context=8",
                                        "model.d_model=16",
                                        "model.heads=2",
                                        "model.layers=1",
                                        "train.steps=2",
                                        "train.batch_size=2",
                                        "train.eval_every=2",
                                        "train.eval_batches=2",
                                        "train.eval_batch_size=2",
                                        "train.peak_tflops=1",
                                        "train.log_every=1",
                                        "schedule.warmup_steps=1",
                                        "sweep.variants=[QKV]"});
  REQUIRE(e.runs.size() == 1);
  const fs::path out = tmp.path / "runs";
  const RunDir dir(out, e.runs[0]);
  dir.start(e.runs[0].config);
  const ResultRow row = tasks::run_lm(e.runs[0], dir, out, false);
  REQUIRE(row.precision.has_value());
  CHECK(row.precision->requested == loops::Precision::bf16);
  CHECK(row.precision->used == loops::Precision::bf16);
  CHECK(dir.read_result() == row);
  REQUIRE(row.lm());
  CHECK(std::isfinite(row.lm()->val_loss));
  // The val split is the validation file, whole: 6 documents of "doc v..." after end-of-text.
  const data::DatasetInfo info = data::read_dataset_info(out / "tokens" / e.config.name());
  int64_t want = 0;
  for (int d = 0; d < 6; ++d) want += 1 + 4 + d + 1;
  CHECK(info.split("val").tokens == want);

  // result.json: the precision field, absent in older rows, checked when present.
  nlohmann::json j = to_json(row);
  CHECK(j["precision"]["requested"] == "bf16");
  CHECK(j["precision"]["used"] == "bf16");
  nlohmann::json old = j;
  old.erase("precision");
  CHECK_FALSE(result_from_json(old, "old.json").precision.has_value());
  j["precision"]["used"] = "fp8";
  test::check_contains(test::error_of<IOError>([&] { result_from_json(j, "r.json"); }),
                       {"r.json", "precision.used", "fp8"});
}
