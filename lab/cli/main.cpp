// qkvlab: the command-line entry point.
#include <filesystem>
#include <iostream>
#include <new>

#include "lab/cli/commands.h"
#include "tensor/error.h"

int main(int argc, char** argv) {
  CLI::App app{"qkvlab: do transformers need three projections? Experiments on a C++ tensor engine."};
  app.set_version_flag("--version", std::string("qkvlab ") + QKV_VERSION);
  app.require_subcommand(1);
  qkv::cli::add_ops_command(app);
  qkv::cli::add_demo_command(app);
  qkv::cli::add_run_command(app);
  qkv::cli::add_data_command(app);
  qkv::cli::add_table_command(app);
  qkv::cli::add_lm_report_commands(app);
  qkv::cli::add_generate_command(app);
  qkv::cli::add_analyze_command(app);
  qkv::cli::add_eval_command(app);
  qkv::cli::add_convert_command(app);
  qkv::cli::add_hf_commands(app);
  qkv::cli::add_convert_study_command(app);
  qkv::cli::add_reference_commands(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) { return app.exit(e); } catch (const qkv::Error& e) {
    std::cerr << "qkvlab: error: " << e.what() << "\n";
    return 1;
  } catch (const std::filesystem::filesystem_error& e) {  // e.g. a folder that cannot be created
    std::cerr << "qkvlab: error: " << e.what() << "\n";
    return 1;
  } catch (const std::bad_alloc&) {
    std::cerr << "qkvlab: error: out of memory\n";
    return 1;
  } catch (const std::exception& e) {  // a library's own error type: still an error, never an abort
    std::cerr << "qkvlab: error: " << e.what() << "\n";
    return 1;
  } catch (...) {
    std::cerr << "qkvlab: error: an unknown exception\n";
    return 1;
  }
  return 0;
}
