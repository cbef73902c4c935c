// The result-row contract (lab/experiment/result.h) and the metrics records under it
// (train/loops/metrics.h): every kind round-trips through JSON unchanged; a missing, mistyped or
// renamed field, an unknown record or family is an IOError naming the file (and line) and the
// field, never a silent zero.
#include <doctest/doctest.h>

#include <fstream>

#include "lab/experiment/result.h"
#include "tests/support/error_checks.h"
#include "tests/support/test_support.h"
#include "train/loops/metrics.h"

using namespace qkv;
using namespace qkv::experiment;
using test::check_contains;

namespace {

ResultRow identity(TaskKind kind, const std::string& task) {
  ResultRow r;
  r.experiment = "exp";
  r.kind = kind;
  r.task = task;
  r.run = "d_model=64/Q-K=V/seed3";
  r.variant = "Q-K=V";
  r.seed = 3;
  r.point = {{"model.d_model", "64"}, {"optim.lr", "1e-3"}};
  r.params = 123456;
  return r;
}

ResultRow vision_row() {
  ResultRow r = identity(TaskKind::vision, "mnist");
  r.metrics = ClassificationResult{0.975, 0.08, 0.98,
                                   3,     1720, 80.5,
                                   21.4,  0.01, {{1, 0.5, 0.2, 0.95}, {2, 0.2, 0.1, 0.97}, {3, 0.1, 0.09, 0.98}}};
  r.images = ImageCounts{55000, 10000};
  return r;
}

ResultRow anomaly_row() {
  ResultRow r = identity(TaskKind::anomaly, "anomaly");
  r.metrics = ClassificationResult{0.41, 1.7, 0.42, 5, 390, 12.0, 32.5, 0.0, {{5, 1.8, 1.7, 0.42}}};
  r.sets = SetSource{"cifar10", "resnet34 (random init)", 0.1};
  return r;
}

ResultRow lm_row() {
  ResultRow r = identity(TaskKind::lm, "lm");
  r.metrics = LmResult{
      5.3, 200.3, 5.29, 500, 2, 100, 5400.5, 0.21, 2.9e11, 180.0, 40960, 0.5, {{100, 6.1, 445.8}, {500, 5.3, 200.3}}};
  return r;
}

std::string error_of(const std::function<void()>& f) { return test::error_of<IOError>(f); }

}  // namespace

TEST_CASE("result rows: every family round-trips through JSON and through result.json") {
  test::TempDir dir;
  for (const ResultRow& r :
       {vision_row(), anomaly_row(), lm_row(), [] {
          ResultRow s = identity(TaskKind::synthetic, "copy");
          s.metrics = ClassificationResult{1.0, 0.01, 1.0, 1, 314, 5.0, 62.0, 0.0, {{1, 0.3, 0.02, 0.99}}};
          return s;
        }()}) {
    CAPTURE(r.task);
    CHECK(result_from_json(to_json(r), "x") == r);
    const std::string file = dir.write("result.json", to_json(r).dump(2));
    CHECK(read_result_file(file) == r);
  }
  CHECK(summary(vision_row()) == "test accuracy 0.9750");
  CHECK(summary(lm_row()) == "val ppl 200.30");
  // Equality is not vacuous.
  ResultRow other = vision_row();
  other.images->train_examples = 1;
  CHECK(!(other == vision_row()));
}

TEST_CASE("result rows: a missing, mistyped or renamed field is named with its file") {
  const nlohmann::json good = to_json(vision_row());
  auto without = [&](const char* key) {
    nlohmann::json j = good;
    j.erase(key);
    return j;
  };
  check_contains(error_of([&] { result_from_json(without("test_accuracy"), "runs/a/result.json"); }),
                 {"runs/a/result.json", "field 'test_accuracy' is missing", "a number"});
  check_contains(error_of([&] { result_from_json(without("train_examples"), "r.json"); }), {"field 'train_examples'"});
  check_contains(error_of([&] { result_from_json(without("kind"), "r.json"); }), {"field 'kind' is missing"});
  nlohmann::json renamed = without("test_accuracy");
  renamed["test_acc"] = 0.9;
  check_contains(error_of([&] { result_from_json(renamed, "r.json"); }), {"field 'test_accuracy' is missing"});
  nlohmann::json typed = good;
  typed["seed"] = "three";
  check_contains(error_of([&] { result_from_json(typed, "r.json"); }),
                 {"field 'seed' is \"three\", expected an integer"});
  typed = good;
  typed["kind"] = "images";
  check_contains(error_of([&] { result_from_json(typed, "r.json"); }),
                 {"field 'kind' is 'images'", "synthetic|vision"});
  typed = good;
  typed["epochs"][1].erase("val_accuracy");
  check_contains(error_of([&] { result_from_json(typed, "r.json"); }), {"r.json: epochs[1]", "field 'val_accuracy'"});
  typed = to_json(lm_row());
  typed["evals"][0]["record"] = "epoch";
  check_contains(error_of([&] { result_from_json(typed, "r.json"); }), {"evals[0]"});
  check_contains(error_of([&] { result_from_json(nlohmann::json::array(), "r.json"); }),
                 {"r.json", "expected a JSON object"});
  // An lm row read as one: its classification fields are not there to be read as zeros.
  nlohmann::json lm_as_vision = to_json(lm_row());
  lm_as_vision["kind"] = "vision";
  check_contains(error_of([&] { result_from_json(lm_as_vision, "r.json"); }), {"field 'test_accuracy' is missing"});
}

TEST_CASE("metrics records: each kind round-trips and a damaged line is named with file and line") {
  const std::vector<loops::MetricsRecord> records = {loops::StepRecord{1, 50, 0.7, 1e-3, 2.5, 48.0},
                                                     loops::EpochRecord{1, 0.6, 0.5, 0.8},
                                                     loops::TestRecord{1, 0.8, 0.79, 0.55, 12.5, 0.1},
                                                     loops::LmStepRecord{20, 1, 6.5, 2e-3, INFINITY, 5300.0, 0.2},
                                                     loops::LmStepRecord{40, 1, 6.1, 2e-3, 0.9, 5400.0, std::nullopt},
                                                     loops::EvalRecord{100, 5.9, 365.0}};
  test::TempDir dir;
  std::string text;
  for (const auto& r : records) {
    const nlohmann::json j = loops::to_json(r);
    const loops::MetricsRecord back = loops::metrics_record_from_json(nlohmann::json::parse(j.dump()), "m");
    if (const auto* s = std::get_if<loops::LmStepRecord>(&r); s && !std::isfinite(s->grad_norm)) {
      CHECK(std::isnan(std::get<loops::LmStepRecord>(back).grad_norm));  // a skipped step's norm: null
      continue;
    }
    CHECK(back == r);
    text += j.dump() + "\n";
  }
  const std::string file = dir.write("metrics.jsonl", text + "{\"record\": \"eval\", \"step\": 5}\n");
  check_contains(error_of([&] { loops::read_metrics(file); }), {file + ":6", "field 'val_loss' is missing"});
  const std::string bad = dir.write("bad.jsonl", text + "{\"record\": \"eval\", \n");
  check_contains(error_of([&] { loops::read_metrics(bad); }), {bad + ":6", "malformed JSON"});
  const std::string unknown = dir.write("unknown.jsonl", "{\"record\": \"batch\"}\n");
  check_contains(error_of([&] { loops::read_metrics(unknown); }), {unknown + ":1", "'batch'", "step, epoch, test"});
  const auto read = loops::read_metrics(dir.write("ok.jsonl", text));
  CHECK(loops::records_of<loops::EvalRecord>(read).size() == 1);
  CHECK(loops::records_of<loops::StepRecord>(read).size() == 1);
  CHECK(loops::read_metrics(dir.path / "missing.jsonl").empty());
}
