// The runners: the synthetic path end to end (a YAML file with overrides, a trained run with its
// folder and result row, Table 1 with the paper's numbers, the attention maps), and the settings
// every epoch family takes from its sections (the one schedule factory honours warmup_steps).
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "lab/experiment/experiment.h"
#include "lab/report/attention_maps.h"
#include "lab/report/table.h"
#include "lab/tasks/common.h"
#include "lab/tasks/synthetic.h"
#include "tests/support/test_support.h"
#include "train/loops/metrics.h"

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
                                       {"task.train_size=512", "task.val_size=64", "task.test_size=64",
                                        "train.epochs=1", "model.d_model=16", "model.heads=2",
                                        "sweep.variants=[QKV, (Q=K=V)+]", "sweep.seeds=[0]"});
  REQUIRE(e.runs.size() == 2);
  for (const auto& run : e.runs) {
    experiment::RunDir dir(out.path, run);
    CHECK_FALSE(dir.complete());
    dir.start(run.config);
    const experiment::ResultRow result = run_synthetic(run, dir);
    CHECK(dir.complete());
    CHECK(dir.read_result() == result);
    CHECK(result.task == "copy");
    CHECK(result.kind == experiment::TaskKind::synthetic);
    CHECK(result.variant == nn::variant_name(run.variant));
    REQUIRE(result.classification());
    CHECK(result.classification()->test_accuracy > 0.1);  // above chance after one short epoch
    CHECK(result.classification()->steps == 4);
    CHECK(result.classification()->epochs.size() == 1);
    // The metrics file holds the loop's typed records: step lines, the epoch, the test.
    const auto records = loops::read_metrics(dir.path() / "metrics.jsonl");
    CHECK(loops::records_of<loops::EpochRecord>(records) == result.classification()->epochs);
    REQUIRE(loops::records_of<loops::TestRecord>(records).size() == 1);
    CHECK(loops::records_of<loops::TestRecord>(records)[0].test_accuracy == result.classification()->test_accuracy);
    for (const char* f :
         {"config.yaml", "meta.json", "result.json", "checkpoint.safetensors", "metrics.jsonl", "train.log"})
      CHECK(fs::exists(dir.path() / f));
  }
  const report::Results results = report::collect_results(out.path);
  CHECK(results.rows.size() == 2);
  CHECK(results.errors.empty());
  const auto paper = report::load_paper_table(kSource + "/experiments/paper/table1.yaml");
  const auto table = report::build_table(results.rows, &paper);
  CHECK(table.variants == std::vector<std::string>{"QKV", "(Q=K=V)+"});  // the paper's row order
  const std::string md = report::to_markdown(table, &paper, "Table 1");
  CHECK(md.find("[1.000]") != std::string::npos);  // the paper's copy column
  const fs::path png = out.path / "maps.png";
  CHECK(report::write_attention_maps(out.path, png, &paper) == 2);
  std::ifstream is(png, std::ios::binary);
  char sig[8] = {};
  is.read(sig, 8);
  CHECK(std::string(sig + 1, 3) == "PNG");
}

TEST_CASE("every epoch family's schedule honours schedule.warmup_steps through the one factory") {
  // The same settings as steps or as a fraction give the same schedule; warmup_steps wins.
  experiment::EpochSchedule s;
  s.name = experiment::ScheduleName::cosine;
  s.warmup = 0.5;
  s.warmup_steps = 4;
  s.min_lr = 0.0;
  const auto by_steps = optim::make_schedule(schedule_spec(s, 1.0, /*steps_per_epoch=*/10, /*epochs=*/2));
  CHECK(by_steps->lr_at(0) == doctest::Approx(0.25));  // (step + 1) / 4
  CHECK(by_steps->lr_at(3) == doctest::Approx(1.0));
  s.warmup_steps = 0;
  const auto by_fraction = optim::make_schedule(schedule_spec(s, 1.0, 10, 2));
  CHECK(by_fraction->lr_at(0) == doctest::Approx(0.1));  // 10 warmup steps of 20
  s.name = experiment::ScheduleName::multistep;
  s.milestones = {1};
  s.gamma = 0.5;
  const auto multistep = optim::make_schedule(schedule_spec(s, 1.0, 10, 2));
  CHECK(multistep->lr_at(9) == 1.0);
  CHECK(multistep->lr_at(10) == 0.5);  // milestone 1 epoch = step 10
  experiment::StepSchedule lm;
  lm.name = experiment::ScheduleName::constant;
  CHECK(optim::make_schedule(schedule_spec(lm, 0.3, 100))->lr_at(50) == 0.3);

  // And a file's warmup_steps reaches a run's loop: its logged learning rates ramp over 3 steps.
  TempDir out;
  auto e =
      experiment::load_experiment(kSource + "/experiments/synthetic/copy.yaml", "smoke",
                                  {"schedule.warmup_steps=3", "train.epochs=1", "task.train_size=512",
                                   "task.val_size=64", "task.test_size=64", "train.log_every=1", "model.d_model=16",
                                   "model.heads=2", "sweep.variants=[QKV]", "sweep.seeds=[0]"});
  REQUIRE(e.runs.size() == 1);
  experiment::RunDir dir(out.path, e.runs[0]);
  dir.start(e.runs[0].config);
  run_synthetic(e.runs[0], dir);
  const double lr = e.runs[0].config.as<experiment::SyntheticConfig>().optim.lr;
  const auto steps = loops::records_of<loops::StepRecord>(loops::read_metrics(dir.path() / "metrics.jsonl"));
  REQUIRE(steps.size() == 4);
  CHECK(steps[0].lr == doctest::Approx(lr / 3));
  CHECK(steps[1].lr == doctest::Approx(2 * lr / 3));
  CHECK(steps[2].lr == doctest::Approx(lr));
}

TEST_CASE("a run on a CUDA device this machine cannot use fails before training, naming train.device") {
  if (cuda_available()) return;  // the GPU check trains on it instead
  TempDir out;
  auto e = experiment::load_experiment(kSource + "/experiments/synthetic/copy.yaml", "smoke",
                                       {"train.device=cuda:0", "sweep.variants=[QKV]", "sweep.seeds=[0]"});
  REQUIRE(e.runs.size() == 1);
  experiment::RunDir dir(out.path, e.runs[0]);
  dir.start(e.runs[0].config);
  CHECK_THROWS_WITH_AS(run_synthetic(e.runs[0], dir), doctest::Contains("train.device"), DeviceError);
  CHECK_FALSE(dir.complete());
  CHECK_FALSE(fs::exists(dir.path() / "metrics.jsonl"));
}
