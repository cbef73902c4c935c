#include "lab/report/curves.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

#include "lab/report/plot.h"

namespace qkv::report {
namespace {

using Curve = std::vector<double>;  // value per epoch (1-based index - 1)

using Field = std::function<std::optional<double>(const loops::EpochRecord&)>;

// Mean per epoch over the runs of one (task, variant) of one field of the epoch records (records
// without it left out).
Curve mean_curve(const std::vector<const experiment::ResultRow*>& runs, const Field& field) {
  Curve sum, count;
  for (const experiment::ResultRow* r : runs)
    for (const loops::EpochRecord& e : r->classification()->epochs) {
      const std::optional<double> x = field(e);
      if (e.epoch < 1 || !x) continue;
      const size_t i = size_t(e.epoch - 1);
      if (sum.size() <= i) sum.resize(i + 1, 0), count.resize(i + 1, 0);
      sum[i] += *x;
      count[i] += 1;
    }
  for (size_t i = 0; i < sum.size(); ++i) sum[i] = count[i] > 0 ? sum[i] / count[i] : NAN;
  return sum;
}

Series by_epoch(const std::string& label, const Curve& c) {
  Series s{label, {}, c};
  for (size_t i = 0; i < c.size(); ++i) s.x.push_back(double(i + 1));
  return s;
}

// A log axis helps when the positive values span more than a factor of 10 (losses falling
// towards 0); a narrow band reads better on a linear one.
bool log_helps(const std::vector<Series>& series) {
  double lo = INFINITY, hi = 0;
  for (const Series& s : series)
    for (double v : s.y)
      if (std::isfinite(v) && v > 0) lo = std::min(lo, v), hi = std::max(hi, v);
  return hi > 10 * lo;
}

}  // namespace

int write_curves(const std::vector<experiment::ResultRow>& results, const std::vector<std::string>& tasks,
                 const std::vector<std::string>& variants, const std::filesystem::path& stem) {
  std::map<std::pair<std::string, std::string>, std::vector<const experiment::ResultRow*>> runs;
  for (const experiment::ResultRow& r : results)
    if (r.classification() && r.complete()) runs[{r.task, r.variant}].push_back(&r);  // curves of complete runs
  Figure fig{"training loss and accuracy by epoch, mean over runs", 2, {}, {}};
  const Field train_loss = [](const loops::EpochRecord& e) { return std::optional<double>(e.train_loss); };
  const Field val_accuracy = [](const loops::EpochRecord& e) {
    return std::isfinite(e.val_accuracy) ? std::optional<double>(e.val_accuracy) : std::nullopt;
  };
  const Field test_accuracy = [](const loops::EpochRecord& e) { return e.test_accuracy; };
  for (const auto& t : tasks) {
    // Runs without validation (the last epoch tested) monitor the test split every epoch instead.
    bool validated = false;
    for (const auto& [key, rows] : runs)
      for (const experiment::ResultRow* r : rows)
        validated = validated || (key.first == t && r->classification()->protocol != experiment::Protocol::all_last);
    const std::string accuracy = validated ? "validation accuracy" : "test accuracy (monitor)";
    LinePanel loss{t + ": training loss", {"epoch"}, {"training loss"}, {}};
    LinePanel acc{t + ": " + accuracy, {"epoch"}, {accuracy}, {}};
    for (const auto& v : variants) {
      auto it = runs.find({t, v});
      if (it == runs.end()) continue;
      loss.series.push_back(by_epoch(v, mean_curve(it->second, train_loss)));
      acc.series.push_back(by_epoch(v, mean_curve(it->second, validated ? val_accuracy : test_accuracy)));
    }
    if (loss.series.empty()) continue;
    loss.y.log = log_helps(loss.series);
    fig.lines.push_back(std::move(loss));
    fig.lines.push_back(std::move(acc));
  }
  if (fig.lines.empty()) return 0;
  write_figure(fig, stem);
  return int(fig.lines.size() / 2);
}

int write_lm_curves(const std::vector<experiment::ResultRow>& results, const std::vector<std::string>& variants,
                    const std::filesystem::path& stem) {
  LinePanel panel{"validation loss", {"step"}, {"validation loss"}, {}};
  for (const auto& v : variants) {
    Series s{v, {}, {}};
    std::vector<double> count;
    for (const experiment::ResultRow& r : results) {
      if (!r.lm() || r.variant != v || !r.complete()) continue;
      const auto& evals = r.lm()->evals;
      for (size_t i = 0; i < evals.size(); ++i) {
        if (s.y.size() <= i) s.y.resize(i + 1, 0), count.resize(i + 1, 0), s.x.push_back(double(evals[i].step));
        s.y[i] += evals[i].val_loss;
        count[i] += 1;
      }
    }
    if (s.y.empty()) continue;
    for (size_t i = 0; i < s.y.size(); ++i) s.y[i] /= count[i];
    panel.series.push_back(std::move(s));
  }
  if (panel.series.empty()) return 0;
  panel.y.log = log_helps(panel.series);
  write_figure({"language models: validation loss by step, mean over runs", 1, {panel}, {}}, stem);
  return 1;
}

}  // namespace qkv::report
