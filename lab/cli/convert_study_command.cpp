// qkvlab convert-study FILE [--scale NAME] [--out DIR] [key=value ...]: the conversion study
// (lab/studies/convert_study.h).
#include "lab/cli/commands.h"
#include "lab/experiment/overrides.h"
#include "lab/studies/convert_study.h"
#include "tensor/error.h"

namespace qkv::cli {

void add_convert_study_command(CLI::App& app) {
  auto args = std::make_shared<std::vector<std::string>>();  // the file and key=value overrides
  auto scale = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>("runs");
  auto* cmd = app.add_subcommand(
      "convert-study",
      "Convert a trained QKV model to K=V by each method, fine-tune, and compare with K=V from scratch");
  cmd->footer(
      "The file is a language-model experiment with one run (the source) and a `convert` section (qkvlab keys lm):\n"
      "the methods, calibration batches and the fine-tune's steps, learning rate, warmup and validation interval.\n"
      "The K=V model from scratch trains train.steps + convert.finetune_steps steps: the same tokens as the source\n"
      "and a fine-tune together. Finished steps are reused when the command runs again.");
  cmd->add_option("args", *args, "the experiment file (e.g. experiments/lm/convert.yaml) and key=value overrides")
      ->required();
  cmd->add_option("--scale", *scale, "a named scale of the file");
  cmd->add_option("--out", *out, "output folder (default: runs)");
  cmd->callback([args, scale, out] {
    std::vector<std::string> files, overrides;
    experiment::split_arguments(*args, files, overrides);
    check<ValueError>(files.size() == 1, "convert-study: expected one experiment file, got ", files.size());
    studies::run_convert_study(experiment::load_experiment(files[0], *scale, overrides), *out);
  });
}

}  // namespace qkv::cli
