// qkvlab table DIR [--paper FILE]: the paper's tables rebuilt from the runs under DIR, with the
// paper's numbers beside ours; written to DIR/table1.md and DIR/table1.csv and printed, with
// the attention maps of the runs (Fig. 3) in DIR/attention_maps.png.
#include <filesystem>
#include <iostream>

#include "tensor/atomic_file.h"
#include "train/cli/commands.h"
#include "train/report/attention_maps.h"
#include "train/report/table.h"

namespace qkv::train::cli {

std::string default_paper_table() { return std::string(QKV_SOURCE_DIR) + "/experiments/paper/table1.yaml"; }

void print_tables(const std::string& out, std::ostream& os, const std::string& paper_path) {
  namespace fs = std::filesystem;
  const auto results = report::collect_results(out);
  if (results.empty()) {
    os << "no finished runs under " << out << "\n";
    return;
  }
  std::optional<report::PaperTable> paper;
  if (fs::exists(paper_path)) paper = report::load_paper_table(paper_path);
  else os << "(paper numbers not found at " << paper_path << "; pass --paper)\n";
  const report::PaperTable* p = paper ? &*paper : nullptr;
  const report::Table t = report::build_table(results, "test_accuracy", p);
  const std::string md = report::to_markdown(t, p, "Table 1: synthetic tasks, test token accuracy");
  write_file_atomically((fs::path(out) / "table1.md").string(), [&](std::ostream& f) { f << md; });
  write_file_atomically((fs::path(out) / "table1.csv").string(), [&](std::ostream& f) { f << report::to_csv(t, p); });
  os << "\n" << md << "\n(written to " << (fs::path(out) / "table1.md").string() << " and table1.csv)\n";
  const fs::path png = fs::path(out) / "attention_maps.png";
  if (const int maps = report::write_attention_maps(out, png, p); maps > 0)
    os << "attention maps of " << maps << " runs (Fig. 3): " << png.string() << "\n";
}

void add_table_command(CLI::App& app) {
  auto out = std::make_shared<std::string>();
  auto paper = std::make_shared<std::string>(default_paper_table());
  auto* cmd = app.add_subcommand("table", "Rebuild the paper's table from a folder of runs");
  cmd->add_option("dir", *out, "output folder of qkvlab run")->required();
  cmd->add_option("--paper", *paper, "the paper's numbers (YAML)");
  cmd->callback([out, paper] { print_tables(*out, std::cout, *paper); });
}

}  // namespace qkv::train::cli
