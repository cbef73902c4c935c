// Runs one experiment run in its folder with its family's runner (synthetic, vision, anomaly,
// lm), and checks a config's inputs before anything trains. `out` is the output root: shared
// caches (the anomaly features, the language-model tokens) live under it.
#pragma once
#include <filesystem>

#include "lab/experiment/run_dir.h"
#include "train/dist/communicator.h"

namespace qkv::tasks {

// `resume`: a language-model run continues from its newest checkpoint (other families restart).
// `comm`: the data-parallel job (null: one process); rank 0 alone writes to the run folder.
experiment::ResultRow run_task(const experiment::Run& run, const experiment::RunDir& dir,
                               const std::filesystem::path& out, bool resume = false,
                               dist::Communicator* comm = nullptr);

// IOError naming the key and the path looked for when a dataset, the token data or the
// tokenizer a config needs is missing (a features file is checked when it is read).
void check_inputs(const experiment::Config& c);

}  // namespace qkv::tasks
