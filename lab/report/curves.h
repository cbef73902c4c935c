// The paper's Fig. 2: training loss and validation accuracy by epoch, one line per attention
// variant (mean over its runs), one pair of panels per task, from the runs' result rows (a task
// whose runs test the last epoch without validating shows the test split's per-epoch monitor); and
// the language models' validation-loss curves. Runs that diverged are left out (the tables
// count them). Drawn by gnuplot (plot.h): stem.png, .svg and .pdf, with the data in stem.csv.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "lab/experiment/result.h"

namespace qkv::report {

// Draws the tasks in `tasks` (in that order) found in `results`; returns the number of panel
// pairs drawn (0: nothing to draw, no file written). Throws write_figure's IOError when gnuplot
// is missing or fails, after writing stem.csv.
int write_curves(const std::vector<experiment::ResultRow>& results, const std::vector<std::string>& tasks,
                 const std::vector<std::string>& variants, const std::filesystem::path& stem);

// The language-model runs' validation loss by evaluation step, one line per variant (mean over
// its runs), from the result rows' "evals"; returns 0 and writes nothing without any. Errors as
// write_curves.
int write_lm_curves(const std::vector<experiment::ResultRow>& results, const std::vector<std::string>& variants,
                    const std::filesystem::path& stem);

}  // namespace qkv::report
