// qkvlab analyze RUN... [--tokens N] [--out DIR] [--data-root DIR] [--token-data DIR] [--device D]:
// why K=V works (lab/studies/kv_study.h), measured on trained runs of any family — weight
// cosine, linear CKA and token cosine of the Q, K and V projections and the effective rank of
// each weight, per layer and overall, beside the numbers a source gives. Prints the tables and
// writes analysis.md, analysis.csv and a figure to --out.
#include "lab/cli/commands.h"
#include "lab/cli/device_option.h"
#include "lab/studies/kv_study.h"

namespace qkv::cli {

void add_analyze_command(CLI::App& app) {
  auto o = std::make_shared<studies::KvStudyOptions>();
  auto* cmd =
      app.add_subcommand("analyze",
                         "Why K=V works: how alike the Q, K and V projections of trained runs are, by four measures");
  cmd->footer(
      "Per attention layer, on the run's held-out inputs (a language model's validation tokens; the test split of\n"
      "a synthetic, vision or anomaly run, through the weights it tested):\n"
      "  weight cosine  cos(vec W_a, vec W_b) of the flattened weights, where their shapes match;\n"
      "  linear CKA     (Kornblith et al. 2019) of the projection outputs X W^T + b, centred over the inputs;\n"
      "  token cosine   per input, the cosine between its two projection outputs, averaged (GQA/MQA: K and V\n"
      "                 repeated over their group of query heads);\n"
      "  effective rank (Roy & Vetterli 2007) exp(-sum_i p_i ln p_i), p_i = s_i / sum_j s_j over each weight's\n"
      "                 singular values (square roots of its Gram matrix's eigenvalues, float64).\n"
      "Roles one projection serves are tied: 1 (tied). Overall values are the mean over layers; a source's number\n"
      "is shown only where one gives it (docs/ANALYZE_AND_CONVERT.md).");
  cmd->add_option("runs", o->runs, "run folders of `qkvlab run` (config.yaml and the run's weights)")->required();
  cmd->add_option("--tokens", o->tokens,
                  "attention inputs fed per run: tokens, image patches or set elements (default 8192)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--out", o->out,
                  "folder for analysis.md, analysis.csv and the figure (default: <first run>/analysis)");
  cmd->add_option("--data-root", o->data_root, "data.root for the runs' data, if theirs is not valid here");
  cmd->add_option("--token-data", o->token_data,
                  "language models: prepared token folder to read the validation split from (default: the run's, "
                  "<out>/tokens/<experiment>)");
  add_device_option(cmd, o->device, "analyze");
  cmd->callback([o] { studies::run_kv_study(*o); });
}

}  // namespace qkv::cli
