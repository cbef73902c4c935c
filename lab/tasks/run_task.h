// Runs one experiment run, whatever its task kind (synthetic, vision, anomaly, lm), in its folder.
// `out` is the output root: shared caches (the anomaly task's image features) live under it.
#pragma once
#include <nlohmann/json.hpp>

#include "lab/experiment/run_dir.h"
#include "lab/experiment/sweep.h"

namespace qkv::tasks {

// `resume`: a language-model run continues from its newest checkpoint (other tasks restart).
nlohmann::json run_task(const experiment::Run& run, const experiment::RunDir& dir, const std::string& out,
                        bool resume = false);

}  // namespace qkv::tasks
