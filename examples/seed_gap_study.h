// A worked example of a study (docs/ADDING_A_STUDY.md): is each variant's gap to QKV larger than
// the spread between seeds? Trains what is missing of the experiment files with the suite runner,
// then prints per task each variant's mean metric over its seeds (test accuracy; validation
// perplexity for language models), the gap to QKV and that gap in pooled seed standard deviations.
#pragma once
#include <cstdio>
#include <string>
#include <vector>

#include "lab/studies/suite.h"

namespace qkv::examples {

struct SeedGapRow {
  std::string task, variant;
  int seeds = 0;
  double mean = 0;       // over the variant's complete runs
  double gap = 0;        // mean - QKV's mean
  double gap_in_sd = 0;  // gap / pooled standard deviation; NaN with fewer than two seeds each
};

std::vector<SeedGapRow> run_seed_gap_study(const studies::SuiteOptions& o, std::FILE* log = stdout);

}  // namespace qkv::examples
