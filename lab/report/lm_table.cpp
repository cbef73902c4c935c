#include "lab/report/lm_table.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "lab/report/number_text.h"
#include "tensor/error.h"
#include "tensor/format.h"

namespace qkv::report {

using experiment::LmShape;

bool is_lm_table(const PaperTable& p) { return std::find(p.columns.begin(), p.columns.end(), "lm") != p.columns.end(); }

namespace {
// The shape's fields in the order they are printed.
std::vector<std::pair<const char*, int64_t>> shape_fields(const LmShape& s) {
  return {{"layers", s.layers}, {"d_model", s.d_model}, {"heads", s.heads},
          {"FFN", s.ffn},       {"context", s.context}, {"vocab", s.vocab}};
}
}  // namespace

std::string shape_text(const LmShape& s) {
  return cat(s.block == "llama" ? "the Llama block, " : "", s.layers, " layers, d_model ", s.d_model, ", ", s.heads,
             " heads, FFN ", s.ffn, ", context ", s.context, ", vocab ", s.vocab);
}

const PaperTable* paper_table_for(const std::vector<PaperTable>& papers, const std::optional<LmShape>& shape) {
  if (!shape) return nullptr;
  for (const PaperTable& p : papers)
    if (is_lm_table(p) && p.model == shape) return &p;
  return nullptr;
}

std::string no_paper_note(const std::vector<PaperTable>& papers, const std::optional<LmShape>& shape) {
  std::vector<std::string> sizes;
  for (const PaperTable& p : papers)
    if (is_lm_table(p) && p.model) sizes.push_back(cat(p.model_size, " (Table ", p.number, ")"));
  std::string trained;
  for (size_t i = 0; i < sizes.size(); ++i)
    trained += (i == 0 ? "" : i + 1 == sizes.size() ? " and " : ", ") + sizes[i];
  std::string s = "no paper numbers: ";
  if (trained.empty()) s += "no language-model paper table was found";
  else s += cat("the paper trained ", trained, " GPT-2-style models");
  if (shape && shape->block == "llama") s += ", none with the Llama block";
  if (shape) return cat(s, "; these runs are ", shape_text(*shape));
  return s + "; these runs' result.json do not record the model shape (written by an older qkvlab)";
}

std::vector<LmTable> build_lm_tables(const std::vector<ResultRow>& results, const PaperTable* paper) {
  struct Group {
    std::string experiment;
    std::optional<LmShape> shape;
    std::map<std::string, std::vector<const ResultRow*>> runs;  // variant -> runs
  };
  std::vector<Group> groups;  // in the order the rows name them
  for (const ResultRow& r : results) {
    if (!r.lm()) continue;
    auto g = std::find_if(groups.begin(), groups.end(),
                          [&](const Group& x) { return x.experiment == r.experiment && x.shape == r.lm()->model; });
    if (g == groups.end()) g = groups.insert(groups.end(), Group{r.experiment, r.lm()->model, {}});
    g->runs[r.variant].push_back(&r);
  }
  // Each experiment's tables together, in the order the rows name the experiments, by shape within.
  std::vector<std::string> experiments;
  for (const Group& g : groups)
    if (std::find(experiments.begin(), experiments.end(), g.experiment) == experiments.end())
      experiments.push_back(g.experiment);
  auto rank = [&](const Group& g) {
    std::vector<int64_t> key{int64_t(std::find(experiments.begin(), experiments.end(), g.experiment) -
                                     experiments.begin()),
                             g.shape ? 1 : 0};
    if (g.shape)
      for (const auto& [name, value] : shape_fields(*g.shape)) key.push_back(value);
    return key;
  };
  std::stable_sort(groups.begin(), groups.end(), [&](const Group& a, const Group& b) { return rank(a) < rank(b); });
  std::vector<LmTable> tables;
  for (const Group& g : groups) {
    LmTable t;
    t.experiment = t.label = g.experiment;
    t.shape = g.shape;
    // An experiment with several shapes: its label names the fields that differ.
    std::vector<std::string> differ;
    bool unknown = false;
    for (const Group& o : groups) {
      if (o.experiment != g.experiment || &o == &g) continue;
      if (!o.shape || !g.shape) {
        unknown = true;
        continue;
      }
      const auto a = shape_fields(*g.shape), b = shape_fields(*o.shape);
      for (size_t i = 0; i < a.size(); ++i)
        if (a[i].second != b[i].second && std::find(differ.begin(), differ.end(), a[i].first) == differ.end())
          differ.push_back(a[i].first);
    }
    std::string what;
    if (g.shape)
      for (const auto& [name, value] : shape_fields(*g.shape))
        if (std::find(differ.begin(), differ.end(), name) != differ.end())
          what += cat(what.empty() ? "" : ", ", name, " ", value);
    if (unknown && !g.shape) what = "shape not recorded";
    if (!what.empty()) t.label += cat(" (", what, ")");

    std::vector<std::string> order;
    if (paper)
      for (const auto& v : paper->variants)
        if (g.runs.count(v)) order.push_back(v);
    if (!paper && g.runs.count("QKV")) order.push_back("QKV");  // the baseline first
    for (const auto& [v, runs] : g.runs)
      if (std::find(order.begin(), order.end(), v) == order.end()) order.push_back(v);
    for (const auto& v : order) {
      const auto& runs = g.runs.at(v);
      LmRow row;
      row.variant = v;
      std::vector<double> ppl, train;
      for (const ResultRow* r : runs) {
        const experiment::LmResult& l = *r->lm();
        row.tokens_per_s += l.tokens_per_s / double(runs.size());
        row.cache_reduction = l.kv_cache_reduction;
        row.kv_bytes_per_token = l.kv_cache_bytes_per_token_bf16;
        row.params = r->params;
        if (r->diverged) {
          ++row.diverged;
          continue;
        }
        ++row.runs;
        ppl.push_back(std::exp(l.val_loss));
        row.loss += l.val_loss;
        if (l.train_loss && std::isfinite(*l.train_loss)) train.push_back(std::exp(*l.train_loss));
      }
      row.loss = ppl.empty() ? NAN : row.loss / double(ppl.size());
      row.ppl = ppl.empty() ? NAN : 0.0;
      for (double p : ppl) row.ppl += p / double(ppl.size());
      for (double p : ppl) row.ppl_std += (p - row.ppl) * (p - row.ppl);
      row.ppl_std = ppl.size() > 1 ? std::sqrt(row.ppl_std / double(ppl.size() - 1)) : 0.0;
      row.train_ppl = train.empty() ? NAN : 0.0;
      for (double p : train) row.train_ppl += p / double(train.size());
      t.rows.push_back(row);
    }
    tables.push_back(t);
  }
  return tables;
}

namespace {

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

std::optional<double> paper_delta(const PaperTable& p, const std::string& variant) {
  if (auto d = p.at(variant, "dppl")) return d;
  auto ppl = p.at(variant, "val_ppl"), base = p.at("QKV", "val_ppl");
  if (ppl && base && *base > 0) return *ppl / *base - 1;
  return std::nullopt;
}

std::string lm_markdown(const LmTable& t, const PaperTable* paper, const std::string& note) {
  std::ostringstream s;
  const std::string title = paper ? paper->title : "Language modeling";
  s << "### " << title << " — " << t.label << "\n\n";
  if (t.shape) s << "model: " << shape_text(*t.shape) << "\n\n";
  s << "ours: validation perplexity, mean ± std over runs (n)";
  if (paper)
    s << "; the paper's " << (paper->model_size.empty() ? "" : paper->model_size + " ") << "numbers in brackets";
  else if (note.empty()) s << "; no paper numbers";
  if (std::any_of(t.rows.begin(), t.rows.end(), [](const LmRow& r) { return r.diverged > 0; }))
    s << "; runs that diverged (a NaN or inf loss) are counted apart and not averaged";
  const bool paper_train = paper && std::any_of(paper->variants.begin(), paper->variants.end(),
                                                [&](const auto& v) { return paper->at(v, "train_ppl").has_value(); });
  s << ". train PPL: exp of the mean training loss over the last validation interval (the lm_step records of "
       "metrics.jsonl after the validation before the last), mean over runs"
    << (paper && !paper_train ? "; the paper gives none (–)" : "")
    << ". KV B/token: cache bytes per token in bf16, all layers."
    << (paper ? " Where qkvlab's protocol differs from the study's: docs/FIDELITY.md." : "") << "\n";
  if (!note.empty()) s << "\n" << note << "\n";
  s << "\n| variant | val PPL | ΔPPL vs QKV | KV cache reduction | KV B/token | train PPL | params | train tokens/s "
       "|\n|---|---|---|---|---|---|---|---|\n";
  const LmRow* base = find_row(t, "QKV");
  auto note_of = [&](const std::string& v, const std::string& col, const char* f, double scale) {
    auto p = paper ? paper->at(v, col) : std::nullopt;
    return p ? " [" + fmt(f, *p * scale) + "]" : std::string();
  };
  for (const auto& r : t.rows) {
    const bool delta = base && base->runs > 0 && r.runs > 0;
    const auto pd = paper ? paper_delta(*paper, r.variant) : std::nullopt;
    s << "| " << r.variant << " | " << ppl_text(r) << note_of(r.variant, "val_ppl", "%.4g", 1) << " | "
      << (delta ? signed_percent(r.ppl / base->ppl - 1) : std::string("–"))
      << (pd ? " [" + signed_percent(*pd) + "]" : std::string()) << " | " << fmt("%.1f%%", 100 * r.cache_reduction)
      << note_of(r.variant, "cache_reduction", "%.1f%%", 100) << " | " << with_commas(r.kv_bytes_per_token)
      << (paper && paper->at(r.variant, "kv_bytes_per_token")
              ? " [" + with_commas(int64_t(*paper->at(r.variant, "kv_bytes_per_token"))) + "]"
              : std::string())
      << " | " << (std::isfinite(r.train_ppl) ? fmt("%.2f", r.train_ppl) : std::string("–"))
      << (paper && !paper->at(r.variant, "train_ppl") ? " [–]" : note_of(r.variant, "train_ppl", "%.2f", 1)) << " | "
      << fmt("%.2fM", double(r.params) / 1e6) << " | " << fmt("%.0f", r.tokens_per_s)
      << note_of(r.variant, "tokens_per_s", "%.0fk on 8xA100", 1e-3) << " |\n";
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
       "diverged,train_ppl,paper_train_ppl\n";
  for (const auto& t : tables)
    for (const auto& r : t.rows) {
      auto p = paper ? paper->at(r.variant, "val_ppl") : std::nullopt;
      auto ours = [&](double x) { return r.runs > 0 ? fmt("%.6g", x) : std::string(); };  // empty: all diverged
      const bool quote = t.label.find(',') != std::string::npos;
      s << (quote ? "\"" + t.label + "\"" : t.label) << "," << r.variant << "," << ours(r.ppl) << "," << ours(r.ppl_std)
        << "," << r.runs << "," << ours(r.loss) << "," << fmt("%.6g", r.cache_reduction) << "," << r.params << ","
        << fmt("%.6g", r.tokens_per_s) << "," << (p ? fmt("%.4g", *p) : std::string()) << "," << r.diverged << ","
        << (std::isfinite(r.train_ppl) && r.runs > 0 ? fmt("%.6g", r.train_ppl) : std::string()) << ","
        << (paper && paper->at(r.variant, "train_ppl") ? fmt("%.4g", *paper->at(r.variant, "train_ppl"))
                                                       : std::string())
        << "\n";
    }
  return s.str();
}

}  // namespace qkv::report
