// The `qkvlab` subcommands. Each registers itself on the CLI11 app and runs when chosen.
#pragma once
#include <CLI/CLI.hpp>
#include <ostream>
#include <string>

namespace qkv::cli {

void add_ops_command(CLI::App& app);   // qkvlab ops: the op table
void add_demo_command(CLI::App& app);  // qkvlab demo: train a small MLP, print the loss
void print_op_table(std::ostream& os);
void add_run_command(CLI::App& app);            // qkvlab run: experiments from YAML
void add_data_command(CLI::App& app);           // qkvlab data prepare: text -> GPT-2 token shards
void add_table_command(CLI::App& app);          // qkvlab table: the paper's tables from run folders
void add_lm_report_commands(CLI::App& app);     // qkvlab params / flops / cache / bench decode
void add_generate_command(CLI::App& app);       // qkvlab generate: text from a trained run
void add_analyze_command(CLI::App& app);        // qkvlab analyze: why K=V works, from trained runs
void add_eval_command(CLI::App& app);           // qkvlab eval: downstream multiple-choice tasks
void add_convert_command(CLI::App& app);        // qkvlab convert: a trained QKV/GQA run to its K=V form
void add_convert_study_command(CLI::App& app);  // qkvlab convert-study: conversions vs K=V from scratch
void add_hf_commands(CLI::App& app);            // qkvlab import / export: Hugging Face GPT-2 folders
void add_reference_commands(CLI::App& app);     // qkvlab keys / variants: what the files and names accept
void print_variant_table(std::ostream& os);
// This source tree's experiments/paper: where the paper's numbers are found by default.
std::string default_paper_tables();

}  // namespace qkv::cli
