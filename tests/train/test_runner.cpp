// The synthetic experiment path end to end: a YAML file with overrides, a trained run with its
// folder and result row, resumption, Table 1 with the paper's numbers, and the attention maps.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "lab/experiment/experiment.h"
#include "lab/report/attention_maps.h"
#include "lab/report/table.h"
#include "lab/tasks/synthetic.h"
#include "tests/support/test_support.h"

using namespace qkv;
using namespace qkv::tasks;
namespace fs = std::filesystem;

namespace {

using test::TempDir;
const std::string kSource = QKV_SOURCE_DIR;
}  // namespace

TEST_CASE("a synthetic experiment trains, writes its run folder and is skipped once complete") {
  TempDir out;
  auto e = experiment::load_experiment(kSource + "/experiments/synthetic/copy.yaml", "smoke",
                                       {"task.train_size=512", "task.val_size=64", "task.test_size=64", "train.epochs=1",
                                        "model.d_model=16", "model.heads=2", "sweep.variants=[QKV, (Q=K=V)+]", "sweep.seeds=[0]"});
  REQUIRE(e.runs.size() == 2);
  for (const auto& run : e.runs) {
    experiment::RunDir dir(out.path, run);
    CHECK_FALSE(dir.complete());
    dir.start(run.config);
    const auto result = run_synthetic(run, dir);
    CHECK(dir.complete());
    CHECK(result["task"] == "copy");
    CHECK(result["variant"] == run.variant.name);
    CHECK(result["test_accuracy"].get<double>() > 0.1);   // above chance after one short epoch
    CHECK(result["steps"] == 4);
    for (const char* f : {"config.yaml", "meta.json", "result.json", "checkpoint.safetensors", "metrics.jsonl", "train.log"})
      CHECK(fs::exists(dir.path() / f));
  }
  const auto results = report::collect_results(out.path);
  CHECK(results.size() == 2);
  const auto paper = report::load_paper_table(kSource + "/experiments/paper/table1.yaml");
  const auto table = report::build_table(results, "test_accuracy", &paper);
  CHECK(table.variants == std::vector<std::string>{"QKV", "(Q=K=V)+"});   // the paper's row order
  const std::string md = report::to_markdown(table, &paper, "Table 1");
  CHECK(md.find("[1.000]") != std::string::npos);                        // the paper's copy column
  const fs::path png = out.path / "maps.png";
  CHECK(report::write_attention_maps(out.path, png, &paper) == 2);
  std::ifstream is(png, std::ios::binary);
  char sig[8] = {};
  is.read(sig, 8);
  CHECK(std::string(sig + 1, 3) == "PNG");
}

TEST_CASE("the table averages over seeds and grid points, with the paper beside each cell") {
  std::vector<nlohmann::json> results;
  for (double acc : {0.6, 0.8}) results.push_back({{"task", "reverse"}, {"variant", "QKV"}, {"test_accuracy", acc}});
  results.push_back({{"task", "sort"}, {"variant", "QKV"}, {"test_accuracy", 0.9}});
  results.push_back({{"task", "reverse"}, {"variant", "GQA-2"}, {"test_accuracy", 0.5}});
  report::PaperTable paper;
  paper.columns = {"reverse", "sort", "avg"};
  paper.variants = {"QKV"};
  paper.values["QKV"] = {{"reverse", 0.698}, {"sort", 0.971}, {"avg", 0.851}};
  const auto t = report::build_table(results, "test_accuracy", &paper);
  CHECK(t.variants == std::vector<std::string>{"QKV", "GQA-2"});
  const auto& cell = t.cells.at("QKV").at("reverse");
  CHECK(cell.mean == doctest::Approx(0.7));
  CHECK(cell.std == doctest::Approx(0.141421356).epsilon(1e-6));
  CHECK(cell.runs == 2);
  CHECK(t.average.at("QKV") == doctest::Approx(0.8));
  CHECK(t.average.count("GQA-2") == 0);   // not every task ran
  const std::string md = report::to_markdown(t, &paper, "T");
  CHECK(md.find("| QKV | 0.700 ± 0.141 (2) [0.698] | 0.900 ± 0.000 (1) [0.971] | 0.800 [0.851] |") != std::string::npos);
  const std::string csv = report::to_csv(t, &paper);
  CHECK(csv.find("QKV,reverse,0.700000,0.141421,2,0.6980\n") != std::string::npos);
}

TEST_CASE("a malformed paper table names the file and the key") {
  TempDir dir;
  const fs::path p = dir.path / "paper.yaml";
  std::ofstream(p) << "tasks: [reverse]\nrows:\n  QKV: {reverse: high}\n";
  CHECK_THROWS_WITH_AS(report::load_paper_table(p.string()), doctest::Contains("rows.QKV.reverse is not a number"), IOError);
  std::ofstream(p) << "rows: 3\n";
  CHECK_THROWS_WITH_AS(report::load_paper_table(p.string()), doctest::Contains("expected 'tasks'"), IOError);
}
