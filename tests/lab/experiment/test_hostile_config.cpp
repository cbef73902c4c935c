// Configuration files and results a user (or bad luck) could produce: deep nesting, aliases that
// refer to themselves or multiply, FIFOs, sizes beyond any machine, sweeps of thousands of seeds,
// and result files whose counts no table could index.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <nlohmann/json.hpp>
#include <string>

#include "lab/experiment/experiment.h"
#include "lab/experiment/overrides.h"
#include "lab/experiment/result.h"
#include "tests/support/error_checks.h"
#include "tests/support/test_support.h"

using namespace qkv;
using namespace qkv::experiment;
using test::check_contains;
using test::TempDir;

namespace {

std::string config_error(const std::function<void()>& f) { return test::error_of<ConfigError>(f); }

const std::string kTiny = "name: tiny\ntask:\n  name: reverse\nmodel:\n  d_model: 32\n  heads: 4\n";

}  // namespace

TEST_CASE("hostile YAML: deep nesting, self-referencing and multiplying aliases are errors") {
  TempDir dir;
  const std::string deep = dir.write("deep.yaml", kTiny + "x: " + std::string(100000, '[') + std::string(100000, ']'));
  check_contains(config_error([&] { load_experiment(deep); }), {"deep.yaml", "nested too deeply"});

  const std::string alias = dir.write("alias.yaml", kTiny + "a: &a [*a]\n");
  check_contains(config_error([&] { load_experiment(alias); }), {"alias.yaml:7", "nested deeper than 64"});

  // Nine levels of nine aliases each: 387 million values from a few hundred bytes.
  std::string laughs = kTiny + "l0: &l0 [x, x, x, x, x, x, x, x, x]\n";
  for (char i = '1'; i <= '9'; ++i) {
    const char level[] = {'l', i, '\0'}, below[] = {'l', char(i - 1), '\0'};
    laughs.append(level).append(": &").append(level).append(" [");
    for (int k = 0; k < 9; ++k) laughs.append(k ? ", *" : "*").append(below);
    laughs.append("]\n");
  }
  CHECK(laughs.size() < 600);
  const std::string file = dir.write("laughs.yaml", laughs);
  check_contains(config_error([&] { load_experiment(file); }), {"laughs.yaml", "more than 100000 values"});

  check_contains(config_error([&] { parse_override("model.x=&a [*a]"); }),
                 {"override 'model.x=&a [*a]'", "nested deeper than 64"});
}

TEST_CASE("hostile YAML: a FIFO given as an experiment file is refused, not waited on") {
  TempDir dir;
  const std::string fifo = dir.file("exp.yaml");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  check_contains(test::error_of<IOError>([&] { load_experiment(fifo); }), {"exp.yaml", "FIFO"});
}

TEST_CASE("config sizes have upper bounds naming the key, and a model must fit in memory") {
  TempDir dir;
  const std::string exp = dir.write("e.yaml", kTiny);
  check_contains(config_error([&] { load_experiment(exp, "", {"model.d_model=100000000"}); }),
                 {"model.d_model", "expected integer in 1..65536"});
  check_contains(config_error([&] { load_experiment(exp, "", {"train.batch_size=9999999999"}); }),
                 {"train.batch_size"});
  check_contains(config_error([&] {
                   load_experiment(exp, "", {"model.d_model=65536", "model.layers=10000"});
                 }),
                 {"model.layers", "fits in memory", "GiB"});
}

TEST_CASE("sweeps: 4,000 seeds expand to 4,000 runs, each with a one-run sweep section") {
  TempDir dir;
  std::string seeds = "[";
  for (int s = 0; s < 4000; ++s) {
    seeds += s ? "," : "";
    seeds += std::to_string(s);
  }
  const std::string exp = dir.write("e.yaml", kTiny + "sweep:\n  variants: [QKV]\n  seeds: " + seeds + "]\n");
  const Experiment e = load_experiment(exp);
  REQUIRE(e.runs.size() == 4000);
  CHECK(e.runs[3999].seed == 3999);
  CHECK(e.runs[3999].config.sweep().seeds == std::vector<int>{3999});

  // Three axes of 40 values, one of 2, and 4,000 seeds: half a billion runs, refused at once.
  std::string axis = "[";
  for (int v = 2; v <= 41; ++v) {
    axis += v > 2 ? "," : "";
    axis += std::to_string(v);
  }
  axis += "]";
  const std::string huge =
      dir.write("huge.yaml", kTiny + "sweep:\n  variants: [QKV]\n  seeds: " + seeds +
                                 "]\n  grid:\n    model.layers: " + axis + "\n    task.vocab: " + axis +
                                 "\n    train.batch_size: " + axis + "\n    model.dropout: [" + "0.1, 0.2]\n");
  check_contains(config_error([&] { load_experiment(huge); }), {"huge.yaml", "runs", "at most 1000000"});
}

TEST_CASE("results: counts a table indexes by are checked when the file is read") {
  nlohmann::json good = {
      {"experiment", "e"},
      {"kind", "synthetic"},
      {"task", "reverse"},
      {"run", "QKV/seed0"},
      {"variant", "QKV"},
      {"seed", 0},
      {"point", nlohmann::json::object()},
      {"params", 10},
      {"test_accuracy", 0.5},
      {"test_loss", 1.0},
      {"best_val_accuracy", 0.5},
      {"best_epoch", 2},
      {"steps", 4},
      {"seconds", 1.0},
      {"steps_per_second", 4.0},
      {"data_wait_fraction", 0.0},
      {"epochs",
       {{{"record", "epoch"}, {"epoch", 1}, {"train_loss", 1.0}, {"val_loss", 1.0}, {"val_accuracy", 0.4}},
        {{"record", "epoch"}, {"epoch", 2}, {"train_loss", 0.5}, {"val_loss", 0.9}, {"val_accuracy", 0.5}}}}};
  CHECK(result_from_json(good, "r.json").classification()->best_epoch == 2);
  auto damaged = [&](const std::function<void(nlohmann::json&)>& f) {
    nlohmann::json j = good;
    f(j);
    return test::error_of<IOError>([&] { result_from_json(j, "r.json"); });
  };
  check_contains(damaged([](auto& j) { j["epochs"][0]["epoch"] = -3; }), {"r.json", "epochs[0]", "-3"});
  check_contains(damaged([](auto& j) { j["epochs"][1]["epoch"] = 1; }), {"epochs[1]", "after 1"});
  check_contains(damaged([](auto& j) { j["best_epoch"] = 7; }), {"best_epoch", "0..2"});
  check_contains(damaged([](auto& j) { j["best_epoch"] = -1; }), {"best_epoch"});
  check_contains(damaged([](auto& j) { j["params"] = -5; }), {"params", "at least 0"});
  check_contains(damaged([](auto& j) { j["seed"] = int64_t(1) << 40; }), {"seed", "0..2147483647"});
  check_contains(damaged([](auto& j) { j["run"] = ""; }), {"run", "empty"});
  check_contains(damaged([](auto& j) { j["test_accuracy"] = "high"; }), {"test_accuracy", "expected a number"});
}
