// The paper's Fig. 2: training loss and validation accuracy by epoch, one line per attention
// variant (mean over its runs), one pair of panels per task, from the runs' result rows.
#pragma once
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace qkv::train::report {

// Draws the tasks in `tasks` (in that order) found in `results`; returns the number of panels
// pairs drawn (0: nothing to draw, no file written).
int write_curves(const std::vector<nlohmann::json>& results, const std::vector<std::string>& tasks,
                 const std::vector<std::string>& variants, const std::filesystem::path& png);

}  // namespace qkv::train::report
