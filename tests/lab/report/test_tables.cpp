// The tables from result rows: mean ± std over seeds and grid points with the paper's number
// beside each cell, malformed paper tables named with file and key, and a folder with a damaged
// run: that run is reported and the others still make their tables.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "lab/experiment/run_dir.h"
#include "lab/report/table.h"
#include "tests/support/test_support.h"

using namespace qkv;
namespace fs = std::filesystem;

namespace {

using test::TempDir;

experiment::ResultRow row(const std::string& task, const std::string& variant, double accuracy, int seed = 0) {
  experiment::ResultRow r;
  r.experiment = task;
  r.kind = experiment::TaskKind::synthetic;
  r.task = task;
  r.run = variant + "/seed" + std::to_string(seed);
  r.variant = variant;
  r.seed = seed;
  experiment::ClassificationResult c;
  c.test_accuracy = accuracy;
  c.epochs = {{1, 1.0, 0.9, accuracy}};
  r.metrics = c;
  return r;
}

}  // namespace

TEST_CASE("the table averages over seeds and grid points, with the paper beside each cell") {
  std::vector<experiment::ResultRow> results = {row("reverse", "QKV", 0.6, 0), row("reverse", "QKV", 0.8, 1),
                                                row("sort", "QKV", 0.9), row("reverse", "GQA-2", 0.5)};
  report::PaperTable paper;
  paper.columns = {"reverse", "sort", "avg"};
  paper.variants = {"QKV"};
  paper.values["QKV"] = {{"reverse", 0.698}, {"sort", 0.971}, {"avg", 0.851}};
  const auto t = report::build_table(results, &paper);
  CHECK(t.variants == std::vector<std::string>{"QKV", "GQA-2"});
  const auto& cell = t.cells.at("QKV").at("reverse");
  CHECK(cell.mean == doctest::Approx(0.7));
  CHECK(cell.std == doctest::Approx(0.141421356).epsilon(1e-6));
  CHECK(cell.runs == 2);
  CHECK(t.average.at("QKV") == doctest::Approx(0.8));
  CHECK(t.average.count("GQA-2") == 0);  // not every task ran
  const std::string md = report::to_markdown(t, &paper, "T");
  CHECK(md.find("| QKV | 0.700 ± 0.141 (2) [0.698] | 0.900 ± 0.000 (1) [0.971] | 0.800 [0.851] |") !=
        std::string::npos);
  const std::string csv = report::to_csv(t, &paper);
  CHECK(csv.find("QKV,reverse,0.700000,0.141421,2,0.6980,0\n") != std::string::npos);
}

TEST_CASE("a malformed paper table names the file and the key") {
  TempDir dir;
  const fs::path p = dir.path / "paper.yaml";
  std::ofstream(p) << "tasks: [reverse]\nrows:\n  QKV: {reverse: high}\n";
  CHECK_THROWS_WITH_AS(report::load_paper_table(p.string()), doctest::Contains("rows.QKV.reverse is not a number"),
                       IOError);
  std::ofstream(p) << "rows: 3\n";
  CHECK_THROWS_WITH_AS(report::load_paper_table(p.string()), doctest::Contains("expected 'tasks'"), IOError);
}

TEST_CASE("a folder with a damaged result: the damage is named, the other runs still count") {
  TempDir dir;
  const fs::path out = dir.path / "runs";
  for (const auto& r : {row("reverse", "QKV", 0.75, 0), row("reverse", "QKV", 0.25, 1)})
    experiment::RunDir(out, r.experiment, r.run).write_result(r);
  const fs::path bad = out / "reverse" / "Q=K-V" / "seed0";
  fs::create_directories(bad);
  nlohmann::json damaged = experiment::to_json(row("reverse", "Q=K-V", 0.5));
  damaged.erase("test_accuracy");  // a renamed or missing field
  std::ofstream(bad / "result.json") << damaged.dump();
  const report::Results results = report::collect_results(out);
  REQUIRE(results.rows.size() == 2);
  REQUIRE(results.errors.size() == 1);
  CHECK(results.errors[0].find((bad / "result.json").string()) != std::string::npos);
  CHECK(results.errors[0].find("field 'test_accuracy' is missing") != std::string::npos);
  const report::Table t = report::build_table(results.rows, nullptr);
  CHECK(t.cells.at("QKV").at("reverse").mean == doctest::Approx(0.5));
  CHECK(t.cells.count("Q=K-V") == 0);
}
