// qkvlab table DIR [--paper FOLDER]: the paper's tables and figures rebuilt from the runs under
// DIR (lab/report/folder_tables.h).
#include <iostream>

#include "lab/cli/commands.h"
#include "lab/report/folder_tables.h"

namespace qkv::cli {

std::string default_paper_tables() { return std::string(QKV_SOURCE_DIR) + "/experiments/paper"; }

void add_table_command(CLI::App& app) {
  auto out = std::make_shared<std::string>();
  auto paper = std::make_shared<std::string>(default_paper_tables());
  auto* cmd = app.add_subcommand("table", "Rebuild the paper's tables and figures from a folder of runs");
  cmd->add_option("dir", *out, "output folder of qkvlab run")->required();
  cmd->add_option("--paper", *paper, "folder with the paper's numbers (table<N>.yaml)");
  cmd->callback([out, paper] { report::write_folder_tables(*out, *paper, std::cout, std::cerr); });
}

}  // namespace qkv::cli
