// Runs that diverged (a NaN or inf loss or gradient norm stopped them) from config to table:
// the train.on_nonfinite and train.max_consecutive_skips keys, result.json's status (a row
// without one is complete), and the tables, which count diverged runs beside the mean over the
// finite ones in Markdown and CSV and still build. End to end: a synthetic run at a learning
// rate of 1e30 writes a diverged result, and Table 1 builds with it among finite runs.
#include <doctest/doctest.h>

#include <cmath>

#include "lab/experiment/config.h"
#include "lab/experiment/experiment.h"
#include "lab/report/curves.h"
#include "lab/report/lm_table.h"
#include "lab/report/table.h"
#include "lab/tasks/synthetic.h"
#include "tests/support/error_checks.h"
#include "tests/support/test_support.h"

using namespace qkv;
using namespace qkv::experiment;
namespace fs = std::filesystem;

namespace {

const std::string kSource = QKV_SOURCE_DIR;

ResultRow classification(const std::string& task, const std::string& variant, double accuracy, int seed,
                         bool diverged = false) {
  ResultRow r;
  r.experiment = task;
  r.kind = TaskKind::synthetic;
  r.task = task;
  r.run = variant + "/seed" + std::to_string(seed);
  r.variant = variant;
  r.seed = seed;
  ClassificationResult c;
  c.test_accuracy = diverged ? NAN : accuracy;
  c.test_loss = diverged ? NAN : 0.5;
  c.epochs = {{1, 1.0, 0.9, 0.5}};
  c.skipped_steps = diverged ? 3 : 0;
  r.metrics = c;
  if (diverged)
    r.diverged = loops::Divergence{12, 2, "non-finite loss nan, gradient norm nan (train.on_nonfinite: stop)"};
  return r;
}

ResultRow lm(const std::string& variant, double loss, int seed, bool diverged = false) {
  ResultRow r;
  r.experiment = "shakespeare";
  r.kind = TaskKind::lm;
  r.task = "lm";
  r.run = variant + "/seed" + std::to_string(seed);
  r.variant = variant;
  r.seed = seed;
  r.params = 1000;
  LmResult l;
  l.val_loss = diverged ? NAN : loss;
  l.val_ppl = std::exp(l.val_loss);
  l.best_val_loss = l.val_loss;
  l.tokens_per_s = 100;
  l.kv_cache_reduction = 0.5;
  l.evals = {{10, 5.0, std::exp(5.0)}};
  r.metrics = l;
  if (diverged) r.diverged = loops::Divergence{37, 0, "non-finite validation loss (nan) at step 37"};
  return r;
}

}  // namespace

TEST_CASE("config: train.on_nonfinite and train.max_consecutive_skips, in both loops' families") {
  const auto lm_file = kSource + "/experiments/lm/shakespeare.yaml";
  const auto synthetic_file = kSource + "/experiments/synthetic/copy.yaml";
  const Experiment defaults = load_experiment(synthetic_file);
  CHECK(defaults.config.loop().on_nonfinite == loops::OnNonfinite::skip);
  CHECK(defaults.config.loop().max_consecutive_skips == 10);
  const Experiment set = load_experiment(lm_file, "", {"train.on_nonfinite=stop", "train.max_consecutive_skips=0"});
  CHECK(set.config.loop().on_nonfinite == loops::OnNonfinite::stop);
  CHECK(set.config.loop().max_consecutive_skips == 0);
  test::check_contains(test::error_of<ConfigError>(
                           [&] { load_experiment(synthetic_file, "", {"train.on_nonfinite=halt"}); }),
                       {"train.on_nonfinite", "halt", "skip|stop"});
  test::check_contains(test::error_of<ConfigError>(
                           [&] { load_experiment(lm_file, "", {"train.max_consecutive_skips=-1"}); }),
                       {"train.max_consecutive_skips", "-1"});
  for (TaskKind k : {TaskKind::synthetic, TaskKind::lm})
    test::check_contains(describe_schema(k), {"train.on_nonfinite", "train.max_consecutive_skips"});
}

TEST_CASE("result rows: a diverged run's status, divergence and no final metrics round-trip") {
  for (const ResultRow& r : {classification("copy", "QKV", 0, 1, true), lm("QKV", 0, 1, true)}) {
    CAPTURE(r.task);
    const nlohmann::json j = to_json(r);
    CHECK(j.at("status") == "diverged");
    CHECK(j.at("divergence").at("step") == r.diverged->step);
    CHECK(j.dump().find("null") == std::string::npos);  // absent, not null
    for (const char* key : {"test_accuracy", "test_loss", "val_loss", "val_ppl", "best_val_loss"})
      CHECK_FALSE(j.contains(key));
    const ResultRow back = result_from_json(nlohmann::json::parse(j.dump()), "r.json");
    CHECK(back.diverged == r.diverged);
    CHECK(to_json(back) == j);
    CHECK_FALSE(back.complete());
  }
  const ResultRow c = result_from_json(to_json(classification("copy", "QKV", 0, 1, true)), "r.json");
  CHECK(std::isnan(c.classification()->test_accuracy));
  CHECK(c.classification()->skipped_steps == 3);
  CHECK(c.diverged->epoch == 2);
  CHECK(result_from_json(to_json(lm("QKV", 0, 1, true)), "r.json").diverged->epoch == 0);  // none for lm
  CHECK(summary(c) == "diverged at step 12: non-finite loss nan, gradient norm nan (train.on_nonfinite: stop)");

  // A complete row says so; one written before the field existed reads as complete.
  nlohmann::json old = to_json(classification("copy", "QKV", 0.9, 0));
  CHECK(old.at("status") == "complete");
  old.erase("status");
  old.erase("skipped_steps");
  const ResultRow read = result_from_json(old, "r.json");
  CHECK(read.complete());
  CHECK(read.classification()->test_accuracy == 0.9);
  CHECK(read.classification()->skipped_steps == 0);

  nlohmann::json bad = to_json(classification("copy", "QKV", 0.9, 0));
  bad["status"] = "crashed";
  test::check_contains(test::error_of<IOError>([&] { result_from_json(bad, "runs/a/result.json"); }),
                       {"runs/a/result.json", "field 'status' is 'crashed'", "complete or diverged"});
  bad["status"] = "diverged";  // without its divergence
  test::check_contains(test::error_of<IOError>([&] { result_from_json(bad, "runs/a/result.json"); }),
                       {"runs/a/result.json", "field 'divergence' is missing"});
  // A complete row still needs its final metrics.
  nlohmann::json missing = to_json(classification("copy", "QKV", 0.9, 0));
  missing.erase("test_accuracy");
  test::check_contains(test::error_of<IOError>([&] { result_from_json(missing, "r.json"); }),
                       {"field 'test_accuracy' is missing"});
}

TEST_CASE("tables: diverged runs are counted beside the mean over the finite runs") {
  const std::vector<ResultRow> rows = {classification("reverse", "QKV", 0.6, 0),
                                       classification("reverse", "QKV", 0.8, 1),
                                       classification("reverse", "QKV", 0, 2, true),
                                       classification("sort", "QKV", 0.9, 0),
                                       classification("reverse", "Q=K=V", 0.5, 0),
                                       classification("sort", "Q=K=V", 0, 0, true)};
  report::PaperTable paper;
  paper.columns = {"reverse", "sort", "avg"};
  paper.average = {"reverse", "sort"};
  paper.variants = {"QKV", "Q=K=V"};
  paper.values["QKV"] = {{"reverse", 0.698}};
  const report::Table t = report::build_table(rows, &paper);
  const report::Cell& qkv = t.cells.at("QKV").at("reverse");
  CHECK(qkv.runs == 2);
  CHECK(qkv.diverged == 1);
  CHECK(qkv.mean == doctest::Approx(0.7));  // the diverged run does not count
  const report::Cell& all = t.cells.at("Q=K=V").at("sort");
  CHECK(all.runs == 0);
  CHECK(all.diverged == 1);
  CHECK(t.average.at("QKV") == doctest::Approx(0.8));
  CHECK(t.average.count("Q=K=V") == 0);  // no mean for sort: no average

  const std::string md = report::to_markdown(t, &paper, "T");
  test::check_contains(md, {"runs that diverged (a NaN or inf loss) are counted apart",
                            "| QKV | 0.700 ± 0.141 (2, 1 diverged) [0.698] | 0.900 ± 0.000 (1) | 0.800 |",
                            "| Q=K=V | 0.500 ± 0.000 (1) | diverged (1) | – |"});
  CHECK(md.find("nan") == std::string::npos);
  const std::string csv = report::to_csv(t, &paper);
  test::check_contains(csv,
                       {"variant,task,mean,std,runs,paper,diverged\n", "QKV,reverse,0.700000,0.141421,2,0.6980,1\n",
                        "QKV,sort,0.900000,0.000000,1,,0\n", "Q=K=V,sort,,,0,,1\n", "QKV,avg,0.800000,,,,\n"});
  CHECK(csv.find("nan") == std::string::npos);
  // Without a diverged run the note is not there.
  CHECK(report::to_markdown(report::build_table({rows[0]}, nullptr), nullptr, "T").find("diverged") ==
        std::string::npos);

  // The curves leave diverged runs out and still draw.
  test::TempDir dir;
  CHECK(report::write_curves(rows, {"reverse", "sort"}, {"QKV", "Q=K=V"}, dir.path / "c.png") == 2);
}

TEST_CASE("lm tables: a diverged run is counted beside the perplexity of the finite ones") {
  const std::vector<ResultRow> rows = {lm("QKV", 5.0, 0), lm("QKV", 5.0, 1, true), lm("MQA", 0, 0, true)};
  const auto tables = report::build_lm_tables(rows, nullptr);
  REQUIRE(tables.size() == 1);
  REQUIRE(tables[0].rows.size() == 2);
  const report::LmRow& qkv = tables[0].rows[0].variant == "QKV" ? tables[0].rows[0] : tables[0].rows[1];
  CHECK(qkv.variant == "QKV");
  CHECK(qkv.runs == 1);
  CHECK(qkv.diverged == 1);
  CHECK(qkv.ppl == doctest::Approx(std::exp(5.0)));
  CHECK(qkv.tokens_per_s == doctest::Approx(100));
  const std::string md = report::lm_markdown(tables[0], nullptr);
  test::check_contains(md, {"counted apart", "| QKV | 148.41 ± 0.00 (1, 1 diverged) | +0.0% |",
                            "| MQA | diverged (1) | – | 50.0% |", "ranking by validation loss, ours:  QKV\n"});
  CHECK(md.find("nan") == std::string::npos);
  const std::string csv = report::lm_csv(tables, nullptr);
  test::check_contains(csv,
                       {",paper_val_ppl,diverged,train_ppl,paper_train_ppl\n",
                        "shakespeare,QKV,148.413,0,1,5,0.5,1000,100,,1,", "shakespeare,MQA,,,0,,0.5,1000,100,,1,,\n"});
  test::TempDir dir;
  CHECK(report::write_lm_curves(rows, {"QKV", "MQA"}, dir.path / "lm.png") == 1);
}

TEST_CASE("a synthetic run at a learning rate of 1e30 is written as diverged and Table 1 still builds") {
  test::TempDir out;
  const std::vector<std::string> small = {"task.train_size=256", "task.val_size=64",    "task.test_size=64",
                                          "train.epochs=1",      "train.batch_size=64", "model.d_model=16",
                                          "model.heads=2",       "sweep.variants=[QKV]"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> o = small;
    o.insert(o.end(), extra.begin(), extra.end());
    return load_experiment(kSource + "/experiments/synthetic/copy.yaml", "smoke", o);
  };
  const Experiment finite = with({"sweep.seeds=[0]"}), diverging = with({"sweep.seeds=[1]", "optim.lr=1e30"});
  for (const Experiment* e : {&finite, &diverging}) {
    const Run& run = e->runs.at(0);
    RunDir dir(out.path, run);
    dir.start(run.config);
    tasks::run_synthetic(run, dir);
    CHECK(dir.complete());  // a diverged run is finished: it is not run again
  }
  const ResultRow bad = RunDir(out.path, diverging.runs[0]).read_result();
  REQUIRE(bad.diverged.has_value());
  CHECK(std::isnan(bad.classification()->test_accuracy));
  const nlohmann::json j =
      nlohmann::json::parse(test::read_file(RunDir(out.path, diverging.runs[0]).path() / "result.json"));
  CHECK(j.at("status") == "diverged");
  CHECK_FALSE(j.contains("test_accuracy"));
  CHECK(j.dump().find("null") == std::string::npos);  // nothing a reader would have to guess
  CHECK(RunDir(out.path, finite.runs[0]).read_result().complete());

  const report::Results results = report::collect_results(out.path);
  REQUIRE(results.errors.empty());
  REQUIRE(results.rows.size() == 2);
  const auto paper = report::load_paper_table(kSource + "/experiments/paper/table1.yaml");
  const report::Table t = report::build_table(results.rows, &paper);
  CHECK(t.cells.at("QKV").at("copy").runs == 1);
  CHECK(t.cells.at("QKV").at("copy").diverged == 1);
  CHECK(report::to_markdown(t, &paper, "Table 1").find("(1, 1 diverged)") != std::string::npos);
}
