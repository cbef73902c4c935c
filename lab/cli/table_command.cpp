// qkvlab table DIR [--paper FOLDER]: the paper's tables rebuilt from the runs under DIR, each
// with the paper's numbers beside ours (experiments/paper/table<N>.yaml), written to
// DIR/table<N>.md and .csv and printed; plus the figures: attention maps of the synthetic runs
// (Fig. 3, DIR/attention_maps.png), training curves of the vision runs (Fig. 2, DIR/curves.png)
// and validation-loss curves of the language models (DIR/lm_curves.png).
#include <filesystem>
#include <iostream>
#include <set>

#include "lab/cli/commands.h"
#include "lab/report/attention_maps.h"
#include "lab/report/curves.h"
#include "lab/report/lm_table.h"
#include "lab/report/table.h"
#include "tensor/atomic_file.h"
#include "tensor/error.h"

namespace qkv::cli {

namespace fs = std::filesystem;

std::string default_paper_tables() { return std::string(QKV_SOURCE_DIR) + "/experiments/paper"; }

namespace {

void write_table(const fs::path& out, const std::string& stem, const report::Table& t, const report::PaperTable* p,
                 const std::string& title, std::ostream& os) {
  const std::string md = report::to_markdown(t, p, title);
  write_file_atomically((out / (stem + ".md")).string(), [&](std::ostream& f) { f << md; });
  write_file_atomically((out / (stem + ".csv")).string(), [&](std::ostream& f) { f << report::to_csv(t, p); });
  os << "\n" << md << "\n(written to " << (out / (stem + ".md")).string() << " and " << stem << ".csv)\n";
}

void print_lm_tables(const fs::path& out, const std::vector<report::ResultRow>& results, const report::PaperTable* p,
                     std::ostream& os) {
  const auto tables = report::build_lm_tables(results, p);
  if (tables.empty()) return;
  const std::string stem = p ? cat("table", p->number) : std::string("lm");
  std::string md;
  for (const auto& t : tables) md += report::lm_markdown(t, p) + "\n";
  write_file_atomically((out / (stem + ".md")).string(), [&](std::ostream& f) { f << md; });
  write_file_atomically((out / (stem + ".csv")).string(), [&](std::ostream& f) { f << report::lm_csv(tables, p); });
  os << "\n" << md << "(written to " << (out / (stem + ".md")).string() << " and " << stem << ".csv)\n";
  std::vector<std::string> variants;
  for (const auto& t : tables)
    for (const auto& r : t.rows)
      if (std::find(variants.begin(), variants.end(), r.variant) == variants.end()) variants.push_back(r.variant);
  if (report::write_lm_curves(results, variants, out / "lm_curves.png") > 0)
    os << "validation loss curves: " << (out / "lm_curves.png").string() << "\n";
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
  std::set<std::string> shown;
  for (const report::PaperTable& p : papers) {
    if (report::is_lm_table(p)) {
      print_lm_tables(out, results, &p, os);
      shown.insert("lm");
      continue;
    }
    const report::Table t = report::build_table(results, &p);
    if (t.tasks.empty()) continue;
    shown.insert(t.tasks.begin(), t.tasks.end());
    write_table(out, cat("table", p.number), t, &p, p.title, os);
    if (p.number == 1) {
      if (const int maps = report::write_attention_maps(out, out / "attention_maps.png", &p); maps > 0)
        os << "attention maps of " << maps << " runs (Fig. 3): " << (out / "attention_maps.png").string() << "\n";
    } else if (const int n = report::write_curves(results, t.tasks, t.variants, out / "curves.png"); n > 0) {
      os << "training curves of " << n << " tasks (Fig. 2): " << (out / "curves.png").string() << "\n";
    }
  }
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
