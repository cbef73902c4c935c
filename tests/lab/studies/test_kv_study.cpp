// The analyze study (lab/studies/kv_study.h) on run folders the suite runner wrote: a synthetic
// encoder fed its test sequences and a set transformer its test sets, each through the weights
// the run tested; the tables, the CSV and the refusals name what is wrong.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>

#include "io/safetensors.h"
#include "lab/studies/kv_study.h"
#include "lab/studies/suite.h"
#include "tests/support/captured_log.h"
#include "tests/support/error_checks.h"
#include "tests/support/test_support.h"

using namespace qkv;
using report::KvPair;
namespace fs = std::filesystem;

namespace {

const std::string kSource = QKV_SOURCE_DIR;

// Trains the file's runs under `out` with `overrides`; returns their folders, QKV first.
std::vector<std::string> train_runs(const fs::path& out, const std::string& file,
                                    const std::vector<std::string>& overrides) {
  studies::SuiteOptions o;
  o.files = {file};
  o.overrides = overrides;
  o.out = out.string();
  const auto single = dist::make_single();
  test::CapturedLog log;
  studies::run_experiments(studies::load_suite_experiments(o), o, *single, log.file());
  std::vector<std::string> folders;
  for (const auto& e : fs::recursive_directory_iterator(out))
    if (e.path().filename() == "result.json") folders.push_back(e.path().parent_path().string());
  std::sort(folders.begin(), folders.end(), [](const std::string& a, const std::string& b) {
    return (a.find("/QKV/") == std::string::npos) < (b.find("/QKV/") == std::string::npos);
  });
  return folders;
}

void check_ranges(const report::KvAnalysis& a) {
  for (const report::LayerKv& l : a.layers)
    for (KvPair p : report::kKvPairs) {
      CHECK(std::abs(l.cos[size_t(p)].mean) <= 1.0 + 1e-9);
      CHECK((l.cka[size_t(p)].mean >= -1e-9 && l.cka[size_t(p)].mean <= 1.0 + 1e-9));
      if (!std::isnan(l.weight_cos[size_t(p)].mean)) CHECK(std::abs(l.weight_cos[size_t(p)].mean) <= 1.0 + 1e-9);
    }
}

}  // namespace

TEST_CASE("analyze study: a synthetic encoder's runs, fed their test sequences") {
  test::TempDir tmp("kv-study");
  const auto runs = train_runs(tmp.path / "runs", kSource + "/experiments/synthetic/copy.yaml",
                               {"task.train_size=256", "task.val_size=32", "task.test_size=64", "task.length=16",
                                "train.epochs=1", "model.d_model=16", "model.heads=2", "model.layers=2",
                                "sweep.variants=[QKV, Q-K=V]", "sweep.seeds=[0]"});
  REQUIRE(runs.size() == 2);
  studies::KvStudyOptions o;
  o.runs = runs;
  o.tokens = 200;  // 13 sequences of 16
  o.out = (tmp.path / "analysis").string();
  test::CapturedLog out, log;
  const auto results = studies::run_kv_study(o, out.file(), log.file());
  REQUIRE(results.size() == 2);
  CHECK(results[0].label == "QKV");
  CHECK(results[1].label == "Q-K=V");
  for (const report::KvAnalysis& a : results) {
    CHECK(a.family == "encoder");
    CHECK(a.tokens == 13 * 16);
    CHECK(a.layers.size() == 2);
    check_ranges(a);
  }
  CHECK_FALSE(results[0].layers[0].cka[size_t(KvPair::kv)].tied);
  for (auto m : {&report::LayerKv::cos, &report::LayerKv::cka, &report::LayerKv::weight_cos}) {
    CHECK((results[1].layers[1].*m)[size_t(KvPair::kv)].tied);
    CHECK((results[1].layers[1].*m)[size_t(KvPair::kv)].mean == 1.0);
  }
  test::check_contains(out.text(),
                       {"| linear CKA | K, V |", "(encoder, checkpoint.safetensors, 208 test-sequence tokens)"});
  CHECK(fs::exists(tmp.path / "analysis" / "analysis.md"));
  CHECK(fs::exists(tmp.path / "analysis" / "analysis.csv"));

  // Not a run folder, and a run without its tested weights: named.
  studies::KvStudyOptions bad = o;
  bad.runs = {tmp.path.string()};
  test::check_contains(test::error_of<IOError>([&] { studies::run_kv_study(bad, out.file(), log.file()); }),
                       {tmp.path.string(), "no config.yaml"});
  fs::remove(fs::path(runs[0]) / "checkpoint.safetensors");
  bad.runs = {runs[0]};
  test::check_contains(test::error_of<IOError>([&] { studies::run_kv_study(bad, out.file(), log.file()); }),
                       {runs[0], "no checkpoint.safetensors"});
}

TEST_CASE("analyze study: a set transformer's run, fed its test sets") {
  test::TempDir tmp("kv-study-sets");
  // Features from a file: 4 classes of 60 examples, 8 features each.
  std::vector<float> f;
  std::vector<int64_t> labels;
  for (int64_t i = 0; i < 240; ++i) {
    for (int64_t j = 0; j < 8; ++j) f.push_back(float((i % 4) == j % 4) + 0.01f * float((i * 7 + j) % 13));
    labels.push_back(i % 4);
  }
  const Tensor features = from_vector(f, {240, 8}), y = from_vector(labels, {240});
  const std::string file = (tmp.path / "features.safetensors").string();
  safetensors::save(
      file, {{"train.features", features}, {"train.labels", y}, {"test.features", features}, {"test.labels", y}});
  const auto runs =
      train_runs(tmp.path / "runs", kSource + "/experiments/vision/anomaly.yaml",
                 {"data.features=file", "data.features_file=" + file, "data.train_sets=64", "data.test_sets=32",
                  "train.epochs=1", "model.d_model=16", "model.heads=2", "sweep.variants=[QKV]", "sweep.seeds=[0]"});
  REQUIRE(runs.size() == 1);
  studies::KvStudyOptions o;
  o.runs = runs;
  o.tokens = 100;  // 10 sets of 10
  o.out = (tmp.path / "analysis").string();
  test::CapturedLog out, log;
  const report::KvAnalysis a = studies::run_kv_study(o, out.file(), log.file()).at(0);
  CHECK(a.family == "set_transformer");
  CHECK(a.tokens == 100);
  CHECK(a.layers.size() == 2);
  check_ranges(a);
  test::check_contains(out.text(), {"set_transformer", "test-set elements"});
}
