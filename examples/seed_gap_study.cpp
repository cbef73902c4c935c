#include "examples/seed_gap_study.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "lab/report/table.h"

namespace qkv::examples {

namespace {

struct Spread {
  double mean = NAN, variance = NAN;
};

Spread spread(const std::vector<double>& v) {
  Spread s;
  if (v.empty()) return s;
  s.mean = 0;
  for (double x : v) s.mean += x / double(v.size());
  if (v.size() < 2) return s;
  s.variance = 0;
  for (double x : v) s.variance += (x - s.mean) * (x - s.mean) / double(v.size() - 1);
  return s;
}

}  // namespace

std::vector<SeedGapRow> run_seed_gap_study(const studies::SuiteOptions& o, std::FILE* log) {
  // 1. The runs: the suite runner trains what is missing (the paper's tables are not wanted here).
  studies::SuiteOptions runs = o;
  runs.paper_dir.clear();
  const auto single = dist::make_single();
  studies::run_experiments(studies::load_suite_experiments(runs), runs, *single, log);

  // 2. The numbers: every complete result under the output folder, per task and variant.
  std::vector<std::string> tasks;
  std::map<std::string, std::vector<std::string>> variants;  // task -> variants in first-seen order
  std::map<std::pair<std::string, std::string>, std::vector<double>> values;
  for (const experiment::ResultRow& r : report::collect_results(o.out).rows) {
    if (!r.complete()) continue;
    if (!variants.count(r.task)) tasks.push_back(r.task);
    auto& vs = variants[r.task];
    if (std::find(vs.begin(), vs.end(), r.variant) == vs.end())  // QKV first, the others as found
      vs.insert(r.variant == "QKV" ? vs.begin() : vs.end(), r.variant);
    values[{r.task, r.variant}].push_back(r.lm() ? r.lm()->val_ppl : r.classification()->test_accuracy);
  }

  // 3. The table.
  std::vector<SeedGapRow> rows;
  std::fprintf(log,
               "\n| task | variant | seeds | mean | gap to QKV | gap / seed sd |\n|---|---|---:|---:|---:|---:|\n");
  for (const std::string& task : tasks) {
    const Spread base = spread(values[{task, "QKV"}]);
    for (const std::string& variant : variants[task]) {
      const std::vector<double>& v = values[{task, variant}];
      const Spread s = spread(v);
      const double pooled = std::sqrt((s.variance + base.variance) / 2);
      SeedGapRow row{task, variant, int(v.size()), s.mean, s.mean - base.mean, NAN};
      if (pooled > 0) row.gap_in_sd = row.gap / pooled;
      std::fprintf(log, "| %s | %s | %d | %.4f | %+.4f | %+.2f |\n", task.c_str(), variant.c_str(), row.seeds, row.mean,
                   row.gap, row.gap_in_sd);
      rows.push_back(row);
    }
  }
  return rows;
}

}  // namespace qkv::examples
