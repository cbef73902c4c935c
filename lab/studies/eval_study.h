// The study behind `qkvlab eval`: a trained language-model run on the paper's downstream
// multiple-choice tasks (Table 11: ARC-Challenge, ARC-Easy, HellaSwag, PIQA, WinoGrande, 5-shot,
// accuracy averaged; infer/mc_scorer.h), beside the paper's average for the run's variant.
//
// Task files live under a folder, one per task in its standard JSONL layout (data/mc_tasks.h):
// <task_data>/<task>/test.jsonl (or <task_data>/<task>.jsonl) is scored, and
// <task_data>/<task>/train.jsonl, when present, gives the few-shot examples (otherwise the
// other questions of the scored file do). Prints the table and writes
// <out>/downstream_<k>shot.md and .json (default out: <run>/eval).
#pragma once
#include <cstdio>
#include <string>
#include <vector>

#include "lab/infer/mc_scorer.h"
#include "tensor/device.h"

namespace qkv::studies {

struct EvalOptions {
  std::string run;                 // a language-model run folder
  std::vector<std::string> tasks;  // task names (data::mc_task_name)
  std::string task_data;           // the folder of task files
  std::string tokenizer;           // GPT-2 tokenizer folder; empty: the run's lm.tokenizer under data.root
  std::string data_root;           // overrides the run's data.root
  std::string paper_dir;           // experiments/paper: Table 11
  std::string out;                 // empty: <run>/eval
  infer::McScoreOptions scoring;
  Device device = kCPU;
};

struct EvalResult {
  std::vector<infer::McScore> scores;
  double mean_acc = 0, mean_acc_norm = 0;
};

EvalResult run_eval_study(const EvalOptions& o, std::FILE* out = stdout, std::FILE* log = stderr);

}  // namespace qkv::studies
