#include "lab/report/lm_table.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "tensor/error.h"

namespace qkv::report {

bool is_lm_table(const PaperTable& p) { return std::find(p.columns.begin(), p.columns.end(), "lm") != p.columns.end(); }

std::vector<LmTable> build_lm_tables(const std::vector<ResultRow>& results, const PaperTable* paper) {
  std::map<std::string, std::map<std::string, std::vector<const ResultRow*>>> groups;  // experiment -> variant
  std::vector<std::string> experiments;
  for (const ResultRow& r : results) {
    if (!r.lm()) continue;
    if (!groups.count(r.experiment)) experiments.push_back(r.experiment);
    groups[r.experiment][r.variant].push_back(&r);
  }
  std::vector<LmTable> tables;
  for (const auto& e : experiments) {
    LmTable t;
    t.experiment = e;
    std::vector<std::string> order;
    if (paper)
      for (const auto& v : paper->variants)
        if (groups[e].count(v)) order.push_back(v);
    for (const auto& [v, runs] : groups[e])
      if (std::find(order.begin(), order.end(), v) == order.end()) order.push_back(v);
    for (const auto& v : order) {
      const auto& runs = groups[e][v];
      LmRow row;
      row.variant = v;
      std::vector<double> ppl;
      for (const ResultRow* r : runs) {
        const experiment::LmResult& l = *r->lm();
        row.tokens_per_s += l.tokens_per_s / double(runs.size());
        row.cache_reduction = l.kv_cache_reduction;
        row.params = r->params;
        if (r->diverged) {
          ++row.diverged;
          continue;
        }
        ++row.runs;
        ppl.push_back(std::exp(l.val_loss));
        row.loss += l.val_loss;
      }
      row.loss = ppl.empty() ? NAN : row.loss / double(ppl.size());
      row.ppl = ppl.empty() ? NAN : 0.0;
      for (double p : ppl) row.ppl += p / double(ppl.size());
      for (double p : ppl) row.ppl_std += (p - row.ppl) * (p - row.ppl);
      row.ppl_std = ppl.size() > 1 ? std::sqrt(row.ppl_std / double(ppl.size() - 1)) : 0.0;
      t.rows.push_back(row);
    }
    tables.push_back(t);
  }
  return tables;
}

namespace {
std::string fmt(const char* f, double x) {
  char buf[48];
  std::snprintf(buf, sizeof buf, f, x);
  return buf;
}
std::string signed_percent(double x) { return fmt("%+.1f%%", 100 * x); }

// "187.21 ± 1.02 (2)", "187.21 ± 1.02 (2, 1 diverged)" or "diverged (1)".
std::string ppl_text(const LmRow& r) {
  if (r.runs == 0) return cat("diverged (", r.diverged, ")");
  std::string s = cat(fmt("%.2f", r.ppl), " ± ", fmt("%.2f", r.ppl_std), " (", r.runs);
  if (r.diverged > 0) s += cat(", ", r.diverged, " diverged");
  return s + ")";
}

const LmRow* find_row(const LmTable& t, const std::string& v) {
  for (const auto& r : t.rows)
    if (r.variant == v) return &r;
  return nullptr;
}

// Variants from best (lowest) to worst by `value`.
std::string ranking(std::vector<std::pair<double, std::string>> xs) {
  std::sort(xs.begin(), xs.end());
  std::string s;
  for (const auto& [v, name] : xs) s += (s.empty() ? "" : " < ") + name;
  return s;
}
}  // namespace

std::string lm_markdown(const LmTable& t, const PaperTable* paper) {
  std::ostringstream s;
  const std::string title = paper ? paper->title : "Language modeling";
  s << "### " << title << " — " << t.experiment << "\n\n"
    << "ours: validation perplexity, mean ± std over runs (n); the paper's 300M numbers in brackets";
  if (std::any_of(t.rows.begin(), t.rows.end(), [](const LmRow& r) { return r.diverged > 0; }))
    s << "; runs that diverged (a NaN or inf loss) are counted apart and not averaged";
  s << "\n\n"
    << "| variant | val PPL | ΔPPL vs QKV | KV cache reduction | params | train tokens/s |\n|---|---|---|---|---|---|\n";
  const LmRow* base = find_row(t, "QKV");
  auto note = [&](const std::string& v, const std::string& col, const char* f, double scale) {
    auto p = paper ? paper->at(v, col) : std::nullopt;
    return p ? " [" + fmt(f, *p * scale) + "]" : std::string();
  };
  for (const auto& r : t.rows) {
    const bool delta = base && base->runs > 0 && r.runs > 0;
    s << "| " << r.variant << " | " << ppl_text(r) << note(r.variant, "val_ppl", "%.2f", 1) << " | "
      << (delta ? signed_percent(r.ppl / base->ppl - 1) : std::string("–")) << note(r.variant, "dppl", "%+.1f%%", 100)
      << " | " << fmt("%.1f%%", 100 * r.cache_reduction) << note(r.variant, "cache_reduction", "%.1f%%", 100) << " | "
      << fmt("%.2fM", double(r.params) / 1e6) << " | " << fmt("%.0f", r.tokens_per_s)
      << note(r.variant, "tokens_per_s", "%.0fk on 8xA100", 1e-3) << " |\n";
  }
  std::vector<std::pair<double, std::string>> ours, theirs;
  for (const auto& r : t.rows) {
    if (r.runs > 0) ours.emplace_back(r.loss, r.variant);  // a variant whose runs all diverged has no rank
    if (auto p = paper ? paper->at(r.variant, "val_ppl") : std::nullopt) theirs.emplace_back(*p, r.variant);
  }
  s << "\nranking by validation loss, ours:  " << ranking(ours) << "\n";
  if (!theirs.empty()) s << "ranking by validation PPL, paper: " << ranking(theirs) << "\n";
  return s.str();
}

std::string lm_csv(const std::vector<LmTable>& tables, const PaperTable* paper) {
  std::ostringstream s;
  s << "experiment,variant,val_ppl,val_ppl_std,runs,val_loss,kv_cache_reduction,params,tokens_per_s,paper_val_ppl,"
       "diverged\n";
  for (const auto& t : tables)
    for (const auto& r : t.rows) {
      auto p = paper ? paper->at(r.variant, "val_ppl") : std::nullopt;
      auto ours = [&](double x) { return r.runs > 0 ? fmt("%.6g", x) : std::string(); };  // empty: all diverged
      s << t.experiment << "," << r.variant << "," << ours(r.ppl) << "," << ours(r.ppl_std) << "," << r.runs << ","
        << ours(r.loss) << "," << fmt("%.6g", r.cache_reduction) << "," << r.params << ","
        << fmt("%.6g", r.tokens_per_s) << "," << (p ? fmt("%.4g", *p) : std::string()) << "," << r.diverged << "\n";
    }
  return s.str();
}

}  // namespace qkv::report
