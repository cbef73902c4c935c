// The suite runner (lab/studies/suite.h): suites expand to their experiment files, every file is
// loaded before anything trains, complete runs are skipped so a second call trains nothing, a
// dry run lists the runs and the data a real run would miss, and the closing tables are the
// paper's (Table 1 for the synthetic tasks).
#include <doctest/doctest.h>

#include <filesystem>

#include "lab/studies/suite.h"
#include "tests/support/captured_log.h"
#include "tests/support/error_checks.h"
#include "tests/support/test_support.h"

using namespace qkv;
namespace fs = std::filesystem;

namespace {

const std::string kSource = QKV_SOURCE_DIR;

// Two tiny copy-task runs that train in well under a second each.
studies::SuiteOptions tiny_suite(const fs::path& out, const std::vector<std::string>& files) {
  studies::SuiteOptions o;
  o.files = files;
  o.scale = "smoke";
  o.overrides = {"task.train_size=256", "task.val_size=32", "task.test_size=32",           "train.epochs=1",
                 "model.d_model=16",    "model.heads=2",    "sweep.variants=[QKV, Q-K=V]", "sweep.seeds=[0]"};
  o.out = out.string();
  o.paper_dir = kSource + "/experiments/paper";
  return o;
}

}  // namespace

TEST_CASE("suite runner: trains what is missing, skips what is complete, ends with Table 1") {
  test::TempDir tmp("suite");
  const studies::SuiteOptions o = tiny_suite(tmp.path / "runs", {kSource + "/experiments/synthetic/copy.yaml"});
  const auto loaded = studies::load_suite_experiments(o);
  REQUIRE(loaded.size() == 1);
  const auto single = dist::make_single();

  test::CapturedLog first;
  const studies::SuiteCounts a = studies::run_experiments(loaded, o, *single, first.file());
  CHECK(a.runs == 2);
  CHECK(a.already_complete == 0);
  CHECK(a.trained == 2);
  test::check_contains(first.text(), {"2 run(s), 0 already complete", "[1/2] copy ", "/QKV/seed0\n", "[2/2] copy ",
                                      "/Q-K=V/seed0\n", "Table 1", "written to"});
  CHECK(fs::exists(tmp.path / "runs" / "table1.md"));

  // Again: nothing trains, the tables are printed all the same.
  test::CapturedLog second;
  const studies::SuiteCounts b = studies::run_experiments(loaded, o, *single, second.file());
  CHECK(b.trained == 0);
  CHECK(b.already_complete == 2);
  CHECK(second.text().find("[1/2]") == std::string::npos);
  test::check_contains(second.text(), {"Table 1"});

  // A dry run lists both as complete; without a paper folder no tables are written.
  studies::SuiteOptions dry = o;
  dry.dry_run = true;
  test::CapturedLog listed;
  CHECK(studies::run_experiments(loaded, dry, *single, listed.file()).trained == 0);
  test::check_contains(listed.text(), {"/QKV/seed0 (complete)", "/Q-K=V/seed0 (complete)"});
}

TEST_CASE("suite runner: suite files expand in order, a dry run names the data a real run would miss") {
  test::TempDir tmp("suite-files");
  const std::string suite = tmp.write("suite.yaml", "suite: [" + kSource + "/experiments/synthetic/sort.yaml, " +
                                                        kSource + "/experiments/synthetic/copy.yaml]\n");
  studies::SuiteOptions o = tiny_suite(tmp.path / "runs", {suite});
  const auto loaded = studies::load_suite_experiments(o);
  REQUIRE(loaded.size() == 2);
  CHECK(loaded[0].config.name() == "sort");
  CHECK(loaded[1].config.name() == "copy");

  // MNIST under a data root that does not exist: listed by a dry run, refused by a real one
  // before anything trains (the copy runs of the same call stay untrained).
  const std::vector<experiment::Experiment> with_mnist = {
      experiment::load_experiment(kSource + "/experiments/vision/mnist.yaml", "smoke",
                                  {"data.root=" + (tmp.path / "no-data").string()}),
      loaded[1]};
  const auto single = dist::make_single();
  o.dry_run = true;
  test::CapturedLog listed;
  studies::run_experiments(with_mnist, o, *single, listed.file());
  test::check_contains(listed.text(), {"missing data (a real run stops here)", "no-data"});
  o.dry_run = false;
  test::CapturedLog refused;
  test::check_contains(test::error_of<Error>([&] { studies::run_experiments(with_mnist, o, *single, refused.file()); }),
                       {"no-data"});
  CHECK_FALSE(fs::exists(tmp.path / "runs" / "copy"));

  o.files.clear();
  test::check_contains(test::error_of<ValueError>([&] { studies::load_suite_experiments(o); }),
                       {"no experiment file given"});
  o.files = {tmp.file("missing.yaml")};
  test::check_contains(test::error_of<Error>([&] { studies::load_suite_experiments(o); }), {"missing.yaml"});
}
