#include "lab/report/context_ablation.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <sstream>

#include "lab/report/number_text.h"
#include "tensor/error.h"

namespace qkv::report {

PaperAblation load_paper_ablation(const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) { throw IOError(cat(path, ": ", e.what())); }
  check<IOError>(root.IsMap() && root["gap"].IsMap(), path,
                 ": expected 'gap', a map of context -> the paper's gap PPL(variant) / PPL(baseline) - 1");
  PaperAblation a;
  auto text = [&](const char* key, std::string& out) {
    if (!root[key]) return;
    check<IOError>(root[key].IsScalar(), path, ": '", key, "' must be text");
    out = root[key].Scalar();
  };
  text("title", a.title);
  text("baseline", a.baseline);
  text("variant", a.variant);
  text("note", a.note);
  if (a.title.empty()) a.title = cat("Sequence-length ablation: ", a.variant, " vs ", a.baseline);
  for (const auto& kv : root["gap"]) {
    check<IOError>(kv.first.IsScalar(), path, ": gap: a context must be a number of tokens");
    const std::string key = kv.first.Scalar();
    int64_t context = 0;
    const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), context);
    check<IOError>(ec == std::errc() && end == key.data() + key.size() && context > 0, path, ": gap.", key,
                   ": expected a context (a positive number of tokens)");
    try {
      a.gap[context] = kv.second.as<double>();
    } catch (const YAML::Exception&) { throw IOError(cat(path, ": gap.", key, " is not a number")); }
    check<IOError>(std::isfinite(a.gap[context]), path, ": gap.", key, " is not a finite number");
  }
  return a;
}

std::optional<int64_t> run_context(const experiment::ResultRow& r) {
  if (!r.lm()) return std::nullopt;
  if (r.lm()->model) return r.lm()->model->context;
  for (const auto& [key, value] : r.point) {
    if (key != "model.context") continue;
    int64_t c = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), c);
    if (ec == std::errc() && end == value.data() + value.size() && c > 0) return c;
  }
  return std::nullopt;
}

std::vector<ContextAblation> build_context_ablations(const std::vector<experiment::ResultRow>& results,
                                                     const PaperAblation* paper) {
  const std::string baseline = paper ? paper->baseline : "QKV", variant = paper ? paper->variant : "Q-K=V";
  struct Group {
    std::string experiment;
    std::optional<experiment::LmShape> rest;  // the shape with its context zeroed
    std::map<int64_t, std::vector<const experiment::ResultRow*>> runs;
  };
  std::vector<Group> groups;
  for (const experiment::ResultRow& r : results) {
    const auto context = run_context(r);
    if (!context || (r.variant != baseline && r.variant != variant)) continue;
    std::optional<experiment::LmShape> rest = r.lm()->model;
    if (rest) rest->context = 0;
    auto g = std::find_if(groups.begin(), groups.end(),
                          [&](const Group& x) { return x.experiment == r.experiment && x.rest == rest; });
    if (g == groups.end()) g = groups.insert(groups.end(), Group{r.experiment, rest, {}});
    g->runs[*context].push_back(&r);
  }
  std::vector<ContextAblation> out;
  for (const Group& g : groups) {
    if (g.runs.size() < 2) continue;  // one context: no ablation
    ContextAblation a;
    a.experiment = g.experiment;
    const bool several = std::count_if(groups.begin(), groups.end(), [&](const Group& o) {
                           return o.experiment == g.experiment && o.runs.size() >= 2;
                         }) > 1;
    if (several && g.rest) a.experiment += cat(" (", g.rest->layers, " layers, d_model ", g.rest->d_model, ")");
    for (const auto& [context, runs] : g.runs) {
      AblationRow row;
      row.context = context;
      double base = 0, var = 0;
      for (const experiment::ResultRow* r : runs) {
        if (r->diverged) continue;
        const double ppl = std::exp(r->lm()->val_loss);
        if (r->variant == baseline) {
          base += ppl;
          ++row.baseline_runs;
        } else {
          var += ppl;
          ++row.variant_runs;
        }
      }
      if (row.baseline_runs > 0) row.baseline_ppl = base / row.baseline_runs;
      if (row.variant_runs > 0) row.variant_ppl = var / row.variant_runs;
      if (row.baseline_runs > 0 && row.variant_runs > 0) row.gap = row.variant_ppl / row.baseline_ppl - 1;
      if (paper)
        if (auto p = paper->gap.find(context); p != paper->gap.end()) row.paper_gap = p->second;
      a.rows.push_back(row);
    }
    out.push_back(a);
  }
  return out;
}

namespace {
std::string ppl(double x, int runs) { return runs > 0 ? cat(fmt("%.2f", x), " (", runs, ")") : std::string("–"); }
}  // namespace

std::string ablation_markdown(const ContextAblation& a, const PaperAblation* paper) {
  const std::string baseline = paper ? paper->baseline : "QKV", variant = paper ? paper->variant : "Q-K=V";
  std::ostringstream s;
  s << "### " << (paper ? paper->title : cat("Sequence-length ablation: ", variant, " vs ", baseline)) << " — "
    << a.experiment << "\n\nours: validation perplexity per training context, mean over complete runs (n); gap = PPL("
    << variant << ") / PPL(" << baseline << ") - 1";
  if (paper) s << "; the paper's gap in brackets where it reports that context";
  if (paper && !paper->note.empty()) s << ". " << paper->note;
  s << "\n\n| context | " << baseline << " val PPL | " << variant << " val PPL | gap |\n|---|---|---|---|\n";
  for (const AblationRow& r : a.rows)
    s << "| " << r.context << " | " << ppl(r.baseline_ppl, r.baseline_runs) << " | "
      << ppl(r.variant_ppl, r.variant_runs) << " | " << (r.gap ? fmt("%+.1f%%", 100 * *r.gap) : std::string("–"))
      << (r.paper_gap ? fmt(" [%+.1f%%]", 100 * *r.paper_gap) : std::string()) << " |\n";
  return s.str();
}

std::string ablation_csv(const std::vector<ContextAblation>& all, const PaperAblation* paper) {
  std::ostringstream s;
  s << "experiment,context,baseline,baseline_val_ppl,baseline_runs,variant,variant_val_ppl,variant_runs,gap,"
       "paper_gap\n";
  const std::string baseline = paper ? paper->baseline : "QKV", variant = paper ? paper->variant : "Q-K=V";
  auto num = [](bool ok, double x) { return ok ? fmt("%.6g", x) : std::string(); };
  for (const ContextAblation& a : all)
    for (const AblationRow& r : a.rows) {
      const bool quote = a.experiment.find(',') != std::string::npos;
      s << (quote ? "\"" + a.experiment + "\"" : a.experiment) << "," << r.context << "," << baseline << ","
        << num(r.baseline_runs > 0, r.baseline_ppl) << "," << r.baseline_runs << "," << variant << ","
        << num(r.variant_runs > 0, r.variant_ppl) << "," << r.variant_runs << "," << num(bool(r.gap), r.gap.value_or(0))
        << "," << num(bool(r.paper_gap), r.paper_gap.value_or(0)) << "\n";
    }
  return s.str();
}

}  // namespace qkv::report
