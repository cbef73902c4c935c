#include "lab/report/curves.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "lab/report/canvas.h"

namespace qkv::report {
namespace {

using Series = std::vector<double>;  // value per epoch (1-based index - 1)

// Mean per epoch over the runs of one (task, variant) of one field of the epoch records.
Series mean_curve(const std::vector<const experiment::ResultRow*>& runs, double loops::EpochRecord::*field) {
  Series sum, count;
  for (const experiment::ResultRow* r : runs)
    for (const loops::EpochRecord& e : r->classification()->epochs) {
      if (e.epoch < 1) continue;
      const size_t i = size_t(e.epoch - 1);
      if (sum.size() <= i) sum.resize(i + 1, 0), count.resize(i + 1, 0);
      sum[i] += e.*field;
      count[i] += 1;
    }
  for (size_t i = 0; i < sum.size(); ++i) sum[i] = count[i] > 0 ? sum[i] / count[i] : NAN;
  return sum;
}

const RGB kPalette[] = {{31, 119, 180}, {255, 127, 14},  {44, 160, 44},   {214, 39, 40},  {148, 103, 189},
                        {140, 86, 75},  {227, 119, 194}, {127, 127, 127}, {188, 189, 34}, {23, 190, 207}};

struct Panel {
  int x, y, w, h;
};

void draw_panel(Canvas& c, const Panel& p, const std::string& title, const std::vector<Series>& lines) {
  c.fill_rect(p.x, p.y, p.w, p.h, {248, 248, 248});
  c.text(p.x + 4, p.y - 12, title, {0, 0, 0});
  double lo = INFINITY, hi = -INFINITY;
  size_t epochs = 1;
  for (const Series& s : lines)
    for (double v : s)
      if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v), epochs = std::max(epochs, s.size());
  if (!std::isfinite(lo)) return;
  if (hi - lo < 1e-9) hi = lo + 1e-3;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", hi);
  c.text(p.x + p.w + 3, p.y, buf, {90, 90, 90});
  std::snprintf(buf, sizeof buf, "%.3g", lo);
  c.text(p.x + p.w + 3, p.y + p.h - 8, buf, {90, 90, 90});
  auto px = [&](size_t i) { return p.x + (epochs > 1 ? int(double(i) / double(epochs - 1) * (p.w - 1)) : p.w / 2); };
  auto py = [&](double v) { return p.y + p.h - 1 - int((v - lo) / (hi - lo) * (p.h - 1)); };
  for (size_t k = 0; k < lines.size(); ++k) {
    const RGB col = kPalette[k % std::size(kPalette)];
    for (size_t i = 0; i < lines[k].size(); ++i) {
      if (!std::isfinite(lines[k][i])) continue;
      c.fill_rect(px(i) - 2, py(lines[k][i]) - 2, 5, 5, col);
      if (i > 0 && std::isfinite(lines[k][i - 1]))
        c.line(px(i - 1), py(lines[k][i - 1]), px(i), py(lines[k][i]), col, 2);
    }
  }
}

}  // namespace

int write_curves(const std::vector<experiment::ResultRow>& results, const std::vector<std::string>& tasks,
                 const std::vector<std::string>& variants, const std::filesystem::path& png) {
  std::map<std::pair<std::string, std::string>, std::vector<const experiment::ResultRow*>> runs;
  for (const experiment::ResultRow& r : results)
    if (r.classification() && r.complete()) runs[{r.task, r.variant}].push_back(&r);  // curves of complete runs
  std::vector<std::string> drawn_tasks;
  for (const auto& t : tasks)
    for (const auto& v : variants)
      if (runs.count({t, v})) {
        drawn_tasks.push_back(t);
        break;
      }
  if (drawn_tasks.empty()) return 0;
  const int pw = 300, ph = 170, gap = 70, top = 40, legend = 150;
  Canvas c(2 * (pw + gap) + legend, top + int(drawn_tasks.size()) * (ph + gap));
  c.text(4, 4, "training loss (left) and validation accuracy (right) by epoch, mean over runs", {60, 60, 60});
  for (size_t k = 0; k < variants.size(); ++k) {  // legend
    c.fill_rect(2 * (pw + gap) + 4, top + 4 + int(k) * 16, 12, 8, kPalette[k % std::size(kPalette)]);
    c.text(2 * (pw + gap) + 20, top + 3 + int(k) * 16, variants[k], {0, 0, 0});
  }
  for (size_t t = 0; t < drawn_tasks.size(); ++t) {
    std::vector<Series> loss, acc;
    for (const auto& v : variants) {
      auto it = runs.find({drawn_tasks[t], v});
      loss.push_back(it == runs.end() ? Series{} : mean_curve(it->second, &loops::EpochRecord::train_loss));
      acc.push_back(it == runs.end() ? Series{} : mean_curve(it->second, &loops::EpochRecord::val_accuracy));
    }
    const int y = top + 14 + int(t) * (ph + gap);
    draw_panel(c, {10, y, pw, ph}, drawn_tasks[t] + ": training loss", loss);
    draw_panel(c, {10 + pw + gap, y, pw, ph}, drawn_tasks[t] + ": validation accuracy", acc);
  }
  c.save_png(png.string());
  return int(drawn_tasks.size());
}

int write_lm_curves(const std::vector<experiment::ResultRow>& results, const std::vector<std::string>& variants,
                    const std::filesystem::path& png) {
  std::vector<Series> lines;
  std::vector<int64_t> steps;  // of the longest curve, for the axis label
  bool any = false;
  for (const auto& v : variants) {
    Series sum, count;
    for (const experiment::ResultRow& r : results) {
      if (!r.lm() || r.variant != v || !r.complete()) continue;
      const auto& evals = r.lm()->evals;
      for (size_t i = 0; i < evals.size(); ++i) {
        if (sum.size() <= i) sum.resize(i + 1, 0), count.resize(i + 1, 0);
        sum[i] += evals[i].val_loss;
        count[i] += 1;
        if (steps.size() <= i) steps.push_back(evals[i].step);
      }
    }
    for (size_t i = 0; i < sum.size(); ++i) sum[i] = count[i] > 0 ? sum[i] / count[i] : NAN;
    any = any || !sum.empty();
    lines.push_back(sum);
  }
  if (!any) return 0;
  const int pw = 520, ph = 300, top = 40, legend = 150;
  Canvas c(pw + 80 + legend, top + ph + 50);
  c.text(4, 4, "language models: validation loss by step, mean over runs", {60, 60, 60});
  for (size_t k = 0; k < variants.size(); ++k) {
    c.fill_rect(pw + 80 + 4, top + 4 + int(k) * 16, 12, 8, kPalette[k % std::size(kPalette)]);
    c.text(pw + 80 + 20, top + 3 + int(k) * 16, variants[k], {0, 0, 0});
  }
  draw_panel(c, {10, top + 14, pw, ph}, "validation loss", lines);
  c.text(10, top + 14 + ph + 6, "step " + std::to_string(steps.front()), {90, 90, 90});
  const std::string last = "step " + std::to_string(steps.back());
  c.text(10 + pw - Canvas::text_width(last), top + 14 + ph + 6, last, {90, 90, 90});
  c.save_png(png.string());
  return 1;
}

}  // namespace qkv::report
