// qkvlab eval RUN --tasks T,... --task-data DIR [--shots K] [--limit N] [--seed S] [--batch B]
// [--tokenizer DIR] [--data-root DIR] [--paper DIR] [--out DIR] [--device D]: a trained language
// model on the paper's downstream multiple-choice tasks (lab/studies/eval_study.h).
#include "lab/cli/commands.h"
#include "lab/cli/device_option.h"
#include "lab/studies/eval_study.h"

namespace qkv::cli {

void add_eval_command(CLI::App& app) {
  auto o = std::make_shared<studies::EvalOptions>();
  o->tasks = {"arc_challenge", "arc_easy", "hellaswag", "piqa", "winogrande"};
  auto* cmd = app.add_subcommand(
      "eval", "A trained language model on the paper's downstream multiple-choice tasks (Table 11), by log-likelihood");
  cmd->footer(
      "Task files: <task-data>/<task>/test.jsonl (or <task-data>/<task>.jsonl) in the task's standard JSONL layout\n"
      "(Hugging Face's ai2_arc, hellaswag, piqa, winogrande exported as JSON lines); <task>/train.jsonl, when present,\n"
      "gives the few-shot examples. Each choice is scored by sum log p(continuation | shots + context), as\n"
      "lm-evaluation-harness does; acc takes the most likely choice, acc_norm the most likely per byte.");
  cmd->add_option("run", o->run, "a language-model run folder of `qkvlab run`")->required();
  cmd->add_option("--tasks", o->tasks,
                  "comma-separated: arc_challenge, arc_easy, hellaswag, piqa, winogrande (default: all five)")
      ->delimiter(',');
  cmd->add_option("--task-data", o->task_data, "folder holding the task files")->required();
  cmd->add_option("--shots", o->scoring.shots, "solved examples before each question (default 5, as Table 11)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--limit", o->scoring.limit, "score only the first N questions of each task (default: all)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--seed", o->scoring.seed, "which few-shot examples (default 1234)");
  cmd->add_option("--batch", o->scoring.batch, "sequences per forward pass (default 8)")->check(CLI::PositiveNumber);
  cmd->add_option("--tokenizer", o->tokenizer, "GPT-2 tokenizer folder (default: the run's lm.tokenizer)");
  cmd->add_option("--data-root", o->data_root, "data.root for the run's tokenizer, if the run's is not valid here");
  o->paper_dir = default_paper_tables();
  cmd->add_option("--paper", o->paper_dir, "folder of the paper's tables (default: this tree's experiments/paper)");
  cmd->add_option("--out", o->out, "folder for downstream_<k>shot.md and .json (default: <run>/eval)");
  add_device_option(cmd, o->device, "eval");
  cmd->callback([o] { studies::run_eval_study(*o); });
}

}  // namespace qkv::cli
