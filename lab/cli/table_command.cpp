// qkvlab table DIR [--paper FOLDER]: the paper's tables rebuilt from the runs under DIR, each
// with the paper's numbers beside ours (experiments/paper/table<N>.yaml), written to
// DIR/table<N>.md and .csv and printed (language models: the table of their model shape, else
// DIR/lm.md without paper numbers; a run over several contexts also DIR/ablation-context.md);
// plus the figures, drawn by gnuplot as .png, .svg and .pdf with their data in .csv: attention
// maps of the synthetic runs (Fig. 3, DIR/attention_maps.*), training curves of the vision runs
// (Fig. 2, DIR/curves.*) and validation-loss curves of the language models (DIR/lm_curves.*).
// Without gnuplot only the figures' CSVs are written, and one line says so.
#include <filesystem>
#include <functional>
#include <iostream>
#include <optional>
#include <set>

#include "lab/cli/commands.h"
#include "lab/report/attention_maps.h"
#include "lab/report/context_ablation.h"
#include "lab/report/curves.h"
#include "lab/report/lm_table.h"
#include "lab/report/plot.h"
#include "lab/report/table.h"
#include "tensor/atomic_file.h"
#include "tensor/error.h"

namespace qkv::cli {

namespace fs = std::filesystem;

std::string default_paper_tables() { return std::string(QKV_SOURCE_DIR) + "/experiments/paper"; }

namespace {

// Draws one figure (`draw` returns how many `unit` it shows; 0: nothing to draw) and says where
// it went. Without gnuplot only its CSV is written (print_tables says once that figures need
// gnuplot); another failure to draw is reported and the tables go on.
void draw_figure(const fs::path& stem, const std::string& name, const char* unit, const std::function<int()>& draw,
                 std::ostream& os) {
  try {
    const int n = draw();
    if (n == 0) return;
    os << name;
    if (unit) os << " of " << n << " " << unit;
    os << ": " << stem.string() << ".png (.svg, .pdf; data in .csv)\n";
  } catch (const report::GnuplotMissing&) {
    os << name << ": data in " << stem.string() << ".csv\n";
  } catch (const IOError& e) { std::cerr << "qkvlab table: " << name << " not drawn: " << e.what() << "\n"; }
}

void write_table(const fs::path& out, const std::string& stem, const report::Table& t, const report::PaperTable* p,
                 const std::string& title, std::ostream& os) {
  const std::string md = report::to_markdown(t, p, title);
  write_file_atomically((out / (stem + ".md")).string(), [&](std::ostream& f) { f << md; });
  write_file_atomically((out / (stem + ".csv")).string(), [&](std::ostream& f) { f << report::to_csv(t, p); });
  os << "\n" << md << "\n(written to " << (out / (stem + ".md")).string() << " and " << stem << ".csv)\n";
}

// The language-model tables, each with the paper table of its model shape (Table 4 for the 300M
// shape, Table 9 for 1.2B; none for another), and the sequence-length ablation.
void print_lm_tables(const fs::path& out, const std::vector<report::ResultRow>& results,
                     const std::vector<report::PaperTable>& papers, const fs::path& paper_dir, std::ostream& os) {
  std::vector<std::pair<const report::PaperTable*, std::vector<report::ResultRow>>> by_paper;
  for (const report::ResultRow& r : results) {
    if (!r.lm()) continue;
    const report::PaperTable* p = report::paper_table_for(papers, r.lm()->model);
    auto b = std::find_if(by_paper.begin(), by_paper.end(), [&](const auto& x) { return x.first == p; });
    if (b == by_paper.end()) b = by_paper.insert(by_paper.end(), {p, {}});
    b->second.push_back(r);
  }
  std::sort(by_paper.begin(), by_paper.end(), [](const auto& a, const auto& b) {
    return (a.first ? a.first->number : 1000000) < (b.first ? b.first->number : 1000000);  // Table 4, 9, then none
  });
  std::vector<report::LmTable> tables;
  for (const auto& [p, rows] : by_paper) {
    const auto group = report::build_lm_tables(rows, p);
    const std::string stem = p ? cat("table", p->number) : std::string("lm");
    std::string md;
    for (const auto& t : group) md += report::lm_markdown(t, p, p ? "" : report::no_paper_note(papers, t.shape)) + "\n";
    write_file_atomically((out / (stem + ".md")).string(), [&](std::ostream& f) { f << md; });
    const auto* paper = p;  // clang before 16 cannot capture a structured binding
    write_file_atomically((out / (stem + ".csv")).string(),
                          [&](std::ostream& f) { f << report::lm_csv(group, paper); });
    os << "\n" << md << "(written to " << (out / (stem + ".md")).string() << " and " << stem << ".csv)\n";
    tables.insert(tables.end(), group.begin(), group.end());
  }
  if (tables.empty()) return;
  std::optional<report::PaperAblation> ablation;
  if (fs::exists(paper_dir / "ablation-context.yaml"))
    ablation = report::load_paper_ablation((paper_dir / "ablation-context.yaml").string());
  const auto ablations = report::build_context_ablations(results, ablation ? &*ablation : nullptr);
  if (!ablations.empty()) {
    std::string md;
    for (const auto& a : ablations) md += report::ablation_markdown(a, ablation ? &*ablation : nullptr) + "\n";
    write_file_atomically((out / "ablation-context.md").string(), [&](std::ostream& f) { f << md; });
    write_file_atomically((out / "ablation-context.csv").string(), [&](std::ostream& f) {
      f << report::ablation_csv(ablations, ablation ? &*ablation : nullptr);
    });
    os << "\n" << md << "(written to " << (out / "ablation-context.md").string() << " and ablation-context.csv)\n";
  }
  std::vector<std::string> variants;
  for (const auto& t : tables)
    for (const auto& r : t.rows)
      if (std::find(variants.begin(), variants.end(), r.variant) == variants.end()) variants.push_back(r.variant);
  draw_figure(
      out / "lm_curves", "validation loss curves", nullptr,
      [&] { return report::write_lm_curves(results, variants, out / "lm_curves"); }, os);
}

}  // namespace

void print_tables(const std::string& dir, std::ostream& os, const std::string& paper_dir) {
  const fs::path out(dir);
  const report::Results collected = report::collect_results(out);
  for (const std::string& e : collected.errors) std::cerr << "qkvlab table: skipped a damaged result: " << e << "\n";
  const std::vector<report::ResultRow>& results = collected.rows;
  if (results.empty()) {
    os << "no finished runs under " << dir << "\n";
    return;
  }
  const std::vector<report::PaperTable> papers = report::load_paper_tables(paper_dir);
  if (papers.empty()) os << "(no paper tables found in " << paper_dir << "; pass --paper)\n";
  if (!report::gnuplot_available())
    os << "(figures need gnuplot (Debian: gnuplot-nox; or set QKV_GNUPLOT): only their data is written, as CSV)\n";
  std::set<std::string> shown = {"lm"};  // language models: print_lm_tables, after the paper's other tables
  for (const report::PaperTable& p : papers) {
    if (report::is_lm_table(p)) continue;
    const report::Table t = report::build_table(results, &p);
    if (t.tasks.empty()) continue;
    shown.insert(t.tasks.begin(), t.tasks.end());
    write_table(out, cat("table", p.number), t, &p, p.title, os);
    if (p.number == 1)
      draw_figure(
          out / "attention_maps", "attention maps (Fig. 3)", "runs",
          [&] { return report::write_attention_maps(out, out / "attention_maps", &p); }, os);
    else
      draw_figure(
          out / "curves", "training curves (Fig. 2)", "tasks",
          [&] { return report::write_curves(results, t.tasks, t.variants, out / "curves"); }, os);
  }
  print_lm_tables(out, results, papers, paper_dir, os);
  std::vector<report::ResultRow> others;  // tasks no paper table lists
  for (const report::ResultRow& r : results)
    if (!shown.count(r.task)) others.push_back(r);
  if (!others.empty())
    write_table(out, "other", report::build_table(others, nullptr), nullptr, "Other runs, test accuracy", os);
}

void add_table_command(CLI::App& app) {
  auto out = std::make_shared<std::string>();
  auto paper = std::make_shared<std::string>(default_paper_tables());
  auto* cmd = app.add_subcommand("table", "Rebuild the paper's tables and figures from a folder of runs");
  cmd->add_option("dir", *out, "output folder of qkvlab run")->required();
  cmd->add_option("--paper", *paper, "folder with the paper's numbers (table<N>.yaml)");
  cmd->callback([out, paper] { print_tables(*out, std::cout, *paper); });
}

}  // namespace qkv::cli
