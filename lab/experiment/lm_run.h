// A trained language-model run folder of `qkvlab run`, opened for reading (qkvlab generate,
// qkvlab analyze): its resolved config and its newest checkpoint.
#pragma once
#include <filesystem>
#include <optional>
#include <string>

#include "lab/experiment/families.h"
#include "lab/experiment/sweep.h"

namespace qkv::experiment {

struct LmRunFiles {
  std::filesystem::path folder, checkpoint;
  Run run;
  LmConfig config;
};
// IOError naming `command` and the folder for one that is not a run (no config.yaml) or has no
// checkpoint; ValueError for a run of another family.
LmRunFiles open_lm_run(const std::filesystem::path& folder, const std::string& command);
// The `out` folder the run was written under, <out>/<experiment>/<run id>; nullopt when the
// folder's path does not end in the experiment's name and the run id (a moved run).
std::optional<std::filesystem::path> run_output_root(const LmRunFiles& r);
// The same of any run folder: <out> when `folder` is <out>/<experiment>/<run_id>.
std::optional<std::filesystem::path> run_output_root(const std::filesystem::path& folder, const std::string& experiment,
                                                     const std::string& run_id);

}  // namespace qkv::experiment
