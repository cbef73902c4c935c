// The conversion study (`qkvlab convert-study FILE`) of a language-model experiment file with one run (the source, QKV
// or GQA-g) and a `convert` section:
//   1. trains the source as `qkvlab run` would, in <out>/<name>/<run id>
//   2. converts it by each of convert.methods into <out>/<name>-<method>/<run id> (qkvlab convert)
//      and measures the validation perplexity right after
//   3. fine-tunes each converted model convert.finetune_steps steps (model.init_from), in
//      <out>/<name>-<method>-finetune/<run id>
//   4. trains the K=V model from scratch for train.steps + convert.finetune_steps, the same total
//      tokens, in <out>/<name>-scratch/<run id>
//   5. prints the table and writes convert_study.md, .csv and the curves convert_study_curves.png
//      (.svg, .pdf, .csv) to <out>/<name>/
// Every step whose folder is complete is reused, so an interrupted study continues where it stopped.
#pragma once
#include <cstdio>
#include <filesystem>

#include "lab/experiment/experiment.h"
#include "lab/report/convert_report.h"

namespace qkv::studies {

// Runs (or continues) the study of `e` under `out`, printing progress and the table to `log`;
// returns what the table and the figure show.
report::ConvertStudy run_convert_study(const experiment::Experiment& e, const std::filesystem::path& out,
                                       std::FILE* log = stdout);

}  // namespace qkv::studies
