// The eval study (lab/studies/eval_study.h): a language-model run folder scored on task files in
// their standard layouts, flat or in a task's folder with its own few-shot examples, beside the
// paper's Table 11 number for the run's variant; the files it writes, and a missing task file.
#include <doctest/doctest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "lab/experiment/experiment.h"
#include "lab/experiment/models.h"
#include "lab/experiment/run_dir.h"
#include "lab/studies/eval_study.h"
#include "tests/support/byte_tokenizer.h"
#include "tests/support/captured_log.h"
#include "tests/support/error_checks.h"
#include "tests/support/test_support.h"
#include "train/loops/lm_checkpoint.h"

using namespace qkv;
namespace fs = std::filesystem;

TEST_CASE("eval study: a run scored on task files beside the paper's Table 11") {
  test::TempDir tmp("eval-study");
  const auto e = experiment::load_experiment(std::string(QKV_SOURCE_DIR) + "/experiments/lm/shakespeare.yaml", "",
                                             {"model.vocab=257", "model.context=64", "model.d_model=16",
                                              "model.heads=2", "model.layers=2", "sweep.variants=[Q-K=V]"});
  const experiment::Run& run = e.runs.at(0);
  const experiment::RunDir dir(tmp.path / "runs", run);
  dir.start(run.config);
  Generator gen(1);
  nn::GPT model(experiment::gpt_config(run.config.as<experiment::LmConfig>(), run.variant), &gen);
  loops::LmLoopState state;
  state.step = 3;
  loops::save_lm_checkpoint(model, {}, state, dir.path(), 1);

  const fs::path tasks = tmp.path / "tasks";
  fs::create_directories(tasks / "piqa");
  std::string piqa, arc;
  for (int i = 0; i < 8; ++i) {
    piqa += "{\"goal\": \"goal " + std::to_string(i) +
            "\", \"sol1\": \"left\", \"sol2\": \"right\", \"label\": " + std::to_string(i % 2) + "}\n";
    arc +=
        "{\"question\": \"q" + std::to_string(i) +
        "\", \"choices\": {\"text\": [\"a\", \"b\", \"c\"], \"label\": [\"A\", \"B\", \"C\"]}, \"answerKey\": \"C\"}\n";
  }
  test::write_file(tasks / "piqa" / "test.jsonl", piqa);
  test::write_file(tasks / "piqa" / "train.jsonl", piqa);
  test::write_file(tasks / "arc_easy.jsonl", arc);

  studies::EvalOptions o;
  o.run = dir.path().string();
  o.tasks = {"piqa", "arc_easy"};
  o.task_data = tasks.string();
  o.tokenizer = test::byte_tokenizer(tmp.path / "tok").string();
  o.paper_dir = std::string(QKV_SOURCE_DIR) + "/experiments/paper";
  o.scoring.shots = 2;
  test::CapturedLog out, log;
  const studies::EvalResult r = studies::run_eval_study(o, out.file(), log.file());
  REQUIRE(r.scores.size() == 2);
  CHECK(r.scores[0].items == 8);
  CHECK(r.scores[1].items == 8);
  for (const infer::McScore& s : r.scores) CHECK((s.acc >= 0 && s.acc <= 1 && s.shots == 2));
  CHECK(r.mean_acc == doctest::Approx((r.scores[0].acc + r.scores[1].acc) / 2));
  test::check_contains(out.text(), {"# Downstream, 2-shot", "(Q-K=V, step_00000003.safetensors)", "| piqa | 8 |",
                                    "| arc_easy | 8 |", "| average |", "The paper's 1.2B Q-K=V averages 35.99"});
  test::check_contains(log.text(), {"shots from " + (tasks / "piqa" / "train.jsonl").string(), "arc_easy: 8 questions",
                                    "shots from the other questions"});
  const nlohmann::json j = nlohmann::json::parse(test::read_file(dir.path() / "eval" / "downstream_2shot.json"));
  CHECK(j.at("tasks").size() == 2);
  CHECK(j.at("mean_acc").get<double>() == doctest::Approx(r.mean_acc));
  CHECK(fs::exists(dir.path() / "eval" / "downstream_2shot.md"));

  o.tasks = {"hellaswag"};
  test::check_contains(test::error_of<IOError>([&] { studies::run_eval_study(o, out.file(), log.file()); }),
                       {"no hellaswag task file", (tasks / "hellaswag" / "test.jsonl").string(),
                        (tasks / "hellaswag.jsonl").string()});
}
