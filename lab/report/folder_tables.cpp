#include "lab/report/folder_tables.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <set>

#include "io/atomic_file.h"
#include "lab/report/attention_maps.h"
#include "lab/report/context_ablation.h"
#include "lab/report/curves.h"
#include "lab/report/lm_pareto.h"
#include "lab/report/lm_table.h"
#include "lab/report/plot.h"
#include "lab/report/table.h"
#include "tensor/error.h"

namespace qkv::report {

namespace fs = std::filesystem;

namespace {

// Draws one figure (`draw` returns how many `unit` it shows; 0: nothing to draw) and says where
// it went. Without gnuplot only its CSV is written (write_folder_tables says once that figures need
// gnuplot); another failure to draw is reported and the tables go on.
void draw_figure(const fs::path& stem, const std::string& name, const char* unit, const std::function<int()>& draw,
                 std::ostream& os, std::ostream& warnings) {
  try {
    const int n = draw();
    if (n == 0) return;
    os << name;
    if (unit) os << " of " << n << " " << unit;
    os << ": " << stem.string() << ".png (.svg, .pdf; data in .csv)\n";
  } catch (const GnuplotMissing&) {
    os << name << ": data in " << stem.string() << ".csv\n";
  } catch (const IOError& e) { warnings << name << " not drawn: " << e.what() << "\n"; }
}

void write_table(const fs::path& out, const std::string& stem, const Table& t, const PaperTable* p,
                 const std::string& title, std::ostream& os) {
  const std::string md = to_markdown(t, p, title);
  write_file_atomically((out / (stem + ".md")).string(), [&](std::ostream& f) { f << md; });
  write_file_atomically((out / (stem + ".csv")).string(), [&](std::ostream& f) { f << to_csv(t, p); });
  os << "\n" << md << "\n(written to " << (out / (stem + ".md")).string() << " and " << stem << ".csv)\n";
}

// The language-model tables, each with the paper table of its model shape (Table 4 for the 300M
// shape, Table 9 for 1.2B; none for another), and the sequence-length ablation.
void print_lm_tables(const fs::path& out, const std::vector<ResultRow>& results, const std::vector<PaperTable>& papers,
                     const fs::path& paper_dir, std::ostream& os, std::ostream& warnings) {
  std::vector<std::pair<const PaperTable*, std::vector<ResultRow>>> by_paper;
  for (const ResultRow& r : results) {
    if (!r.lm()) continue;
    const PaperTable* p = paper_table_for(papers, r.lm()->model);
    auto b = std::find_if(by_paper.begin(), by_paper.end(), [&](const auto& x) { return x.first == p; });
    if (b == by_paper.end()) b = by_paper.insert(by_paper.end(), {p, {}});
    b->second.push_back(r);
  }
  std::sort(by_paper.begin(), by_paper.end(), [](const auto& a, const auto& b) {
    return (a.first ? a.first->number : 1000000) < (b.first ? b.first->number : 1000000);  // Table 4, 9, then none
  });
  std::vector<LmTable> tables;
  for (const auto& [p, rows] : by_paper) {
    const auto group = build_lm_tables(rows, p);
    const std::string stem = p ? cat("table", p->number) : std::string("lm");
    std::string md;
    for (const auto& t : group) md += lm_markdown(t, p, p ? "" : no_paper_note(papers, t.shape)) + "\n";
    write_file_atomically((out / (stem + ".md")).string(), [&](std::ostream& f) { f << md; });
    const auto* paper = p;  // clang before 16 cannot capture a structured binding
    write_file_atomically((out / (stem + ".csv")).string(), [&](std::ostream& f) { f << lm_csv(group, paper); });
    os << "\n" << md << "(written to " << (out / (stem + ".md")).string() << " and " << stem << ".csv)\n";
    const Figure pareto = lm_pareto_figure(group, paper);
    if (!pareto.lines.empty())
      draw_figure(
          out / (stem + "_pareto"), "cache reduction vs perplexity change", nullptr,
          [&] {
            write_figure(pareto, out / (stem + "_pareto"));
            return int(pareto.lines.size());
          },
          os, warnings);
    tables.insert(tables.end(), group.begin(), group.end());
  }
  if (tables.empty()) return;
  std::optional<PaperAblation> ablation;
  if (fs::exists(paper_dir / "ablation-context.yaml"))
    ablation = load_paper_ablation((paper_dir / "ablation-context.yaml").string());
  const auto ablations = build_context_ablations(results, ablation ? &*ablation : nullptr);
  if (!ablations.empty()) {
    std::string md;
    for (const auto& a : ablations) md += ablation_markdown(a, ablation ? &*ablation : nullptr) + "\n";
    write_file_atomically((out / "ablation-context.md").string(), [&](std::ostream& f) { f << md; });
    write_file_atomically((out / "ablation-context.csv").string(),
                          [&](std::ostream& f) { f << ablation_csv(ablations, ablation ? &*ablation : nullptr); });
    os << "\n" << md << "(written to " << (out / "ablation-context.md").string() << " and ablation-context.csv)\n";
  }
  std::vector<std::string> variants;
  for (const auto& t : tables)
    for (const auto& r : t.rows)
      if (std::find(variants.begin(), variants.end(), r.variant) == variants.end()) variants.push_back(r.variant);
  draw_figure(
      out / "lm_curves", "validation loss curves", nullptr,
      [&] { return write_lm_curves(results, variants, out / "lm_curves"); }, os, warnings);
}

}  // namespace

void write_folder_tables(const fs::path& out, const fs::path& paper_dir, std::ostream& os, std::ostream& warnings) {
  const Results collected = collect_results(out);
  for (const std::string& e : collected.errors) warnings << "skipped a damaged result: " << e << "\n";
  const std::vector<ResultRow>& results = collected.rows;
  if (results.empty()) {
    os << "no finished runs under " << out.string() << "\n";
    return;
  }
  const std::vector<PaperTable> papers = load_paper_tables(paper_dir);
  if (papers.empty()) os << "(no paper tables found in " << paper_dir.string() << "; pass --paper)\n";
  if (!gnuplot_available())
    os << "(figures need gnuplot (Debian: gnuplot-nox; or set QKV_GNUPLOT): only their data is written, as CSV)\n";
  std::set<std::string> shown = {"lm"};  // language models: print_lm_tables, after the paper's other tables
  for (const PaperTable& p : papers) {
    if (is_lm_table(p)) continue;
    const Table t = build_table(results, &p);
    if (t.tasks.empty()) continue;
    shown.insert(t.tasks.begin(), t.tasks.end());
    write_table(out, cat("table", p.number), t, &p, p.title, os);
    if (p.number == 1)
      draw_figure(
          out / "attention_maps", "attention maps (Fig. 3)", "runs",
          [&] { return write_attention_maps(out, out / "attention_maps", &p); }, os, warnings);
    else
      draw_figure(
          out / "curves", "training curves (Fig. 2)", "tasks",
          [&] { return write_curves(results, t.tasks, t.variants, out / "curves"); }, os, warnings);
  }
  print_lm_tables(out, results, papers, paper_dir, os, warnings);
  std::vector<ResultRow> others;  // tasks no paper table lists
  for (const ResultRow& r : results)
    if (!shown.count(r.task)) others.push_back(r);
  if (!others.empty())
    write_table(out, "other", build_table(others, nullptr), nullptr, "Other runs, test accuracy", os);
}

}  // namespace qkv::report
