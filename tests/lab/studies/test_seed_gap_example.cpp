// The worked example of docs/ADDING_A_STUDY.md (examples/seed_gap_study.cpp) builds and answers:
// two seeds of QKV and Q=K=V on a tiny copy task, each variant's mean and its gap to QKV in seed
// standard deviations.
#include <doctest/doctest.h>

#include <cmath>

#include "examples/seed_gap_study.h"
#include "tests/support/captured_log.h"
#include "tests/support/error_checks.h"
#include "tests/support/test_support.h"

using namespace qkv;

TEST_CASE("the seed-gap example study trains its runs and measures each gap in seed deviations") {
  test::TempDir tmp("seed-gap");
  studies::SuiteOptions o;
  o.files = {std::string(QKV_SOURCE_DIR) + "/experiments/synthetic/copy.yaml"};
  o.scale = "smoke";
  o.overrides = {"task.train_size=256", "task.val_size=32", "task.test_size=32",  "train.epochs=1",
                 "model.d_model=16",    "model.heads=2",    "sweep.seeds=[0, 1]", "sweep.variants=[QKV, Q=K=V]"};
  o.out = (tmp.path / "runs").string();
  test::CapturedLog log;
  const auto rows = examples::run_seed_gap_study(o, log.file());
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].variant == "QKV");
  CHECK(rows[0].gap == 0);
  CHECK(rows[1].variant == "Q=K=V");
  CHECK(rows[1].seeds == 2);
  CHECK(rows[1].gap == doctest::Approx(rows[1].mean - rows[0].mean));
  CHECK(rows[1].mean >= 0);
  CHECK(rows[1].mean <= 1);
  CHECK_FALSE(std::isnan(rows[1].gap_in_sd));  // two seeds that do not agree to the last digit
  test::check_contains(log.text(), {"[4/4]", "| copy | Q=K=V | 2 |"});
}
