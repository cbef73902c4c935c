// The `qkvlab` subcommands. Each registers itself on the CLI11 app and runs when chosen.
#pragma once
#include <CLI/CLI.hpp>
#include <ostream>

namespace qkv::train::cli {

void add_ops_command(CLI::App& app);    // qkvlab ops: the op table
void add_demo_command(CLI::App& app);   // qkvlab demo: train a small MLP, print the loss
void print_op_table(std::ostream& os);

}  // namespace qkv::train::cli
