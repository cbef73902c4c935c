// qkvlab run FILE... [--scale NAME] [--out DIR] [--dry-run] [--resume | --restart] [key=value ...]
// Runs experiment files (or suite files listing them): every run of each sweep, skipping runs
// whose folder already holds a result, so an interrupted suite continues where it stopped;
// then prints the table of everything under the output folder. Each run's folder is locked while
// it runs; an unfinished run's checkpoints are continued (--resume) or discarded (--restart),
// never dropped silently.
#include <cstdio>
#include <iostream>

#include "lab/cli/commands.h"
#include "lab/experiment/experiment.h"
#include "lab/experiment/node.h"
#include "lab/tasks/lm.h"
#include "lab/tasks/run_task.h"
#include "tensor/error.h"

namespace qkv::cli {
namespace {

struct RunOptions {
  std::vector<std::string> args;  // files and key=value overrides, in any order
  std::string scale;
  std::string out = "runs";
  bool dry_run = false;
  bool resume = false;
  bool restart = false;
};

bool is_suite(const std::string& path) {
  try {
    const experiment::Node n = experiment::load_yaml_file(path);
    return n.is_map() && n.find("suite");
  } catch (const Error&) {
    return false;  // load_experiment reports the error with its position
  }
}

void run(const RunOptions& o) {
  std::vector<std::string> files, overrides;
  for (const std::string& a : o.args) (a.find('=') != std::string::npos ? overrides : files).push_back(a);
  check<ValueError>(!files.empty(), "run: no experiment file given (e.g. qkvlab run experiments/synthetic/suite.yaml)");
  std::vector<std::string> experiments;
  for (const std::string& f : files) {
    if (!is_suite(f)) {
      experiments.push_back(f);
      continue;
    }
    for (const std::string& e : experiment::load_suite(f).experiments) experiments.push_back(e);
  }
  // Load and validate everything before training anything.
  std::vector<experiment::Experiment> loaded;
  std::vector<std::string> missing_data;
  size_t total = 0, done = 0;
  for (const std::string& path : experiments) {
    loaded.push_back(experiment::load_experiment(path, o.scale, overrides));
    try {
      tasks::check_inputs(loaded.back().config);  // a missing dataset stops us before anything trains
    } catch (const Error& e) {
      if (!o.dry_run) throw;
      missing_data.push_back(e.what());  // a dry run lists the runs all the same, and says what is missing
    }
    for (const auto& r : loaded.back().runs) {
      ++total;
      const experiment::RunDir dir(o.out, r);
      const bool complete = dir.complete();
      done += complete;
      // Refused before anything trains: an unfinished run's checkpoints with neither flag.
      if (!complete && !o.dry_run && !o.resume && !o.restart) dir.settle_checkpoints(false, false, stdout);
    }
  }
  std::printf("qkvlab run: %zu experiment(s), %zu run(s), %zu already complete, output in %s\n", loaded.size(), total,
              done, o.out.c_str());
  for (const auto& e : loaded)
    if (e.config.kind() == experiment::TaskKind::lm)
      std::printf("  %s protocol: %s\n", e.config.name().c_str(),
                  tasks::lm_protocol(e.config.as<experiment::LmConfig>()).c_str());
  if (o.dry_run) {
    for (const std::string& m : missing_data) std::printf("  missing data (a real run stops here): %s\n", m.c_str());
    for (const auto& e : loaded)
      for (const auto& r : e.runs)
        std::printf("  %s/%s%s\n", e.config.name().c_str(), r.id.c_str(),
                    experiment::RunDir(o.out, r).complete() ? " (complete)" : "");
    return;
  }
  size_t index = 0;
  for (const auto& e : loaded)
    for (const auto& r : e.runs) {
      ++index;
      experiment::RunDir dir(o.out, r);
      if (dir.complete()) continue;
      const FolderLock lock = dir.lock();  // another process running it: an error naming that process
      if (dir.complete()) continue;        // it finished between the check and the lock
      std::printf("[%zu/%zu] %s %s\n", index, total, e.config.name().c_str(), r.id.c_str());
      for (const auto& f : dir.remove_temporaries())
        std::printf("  removed %s, a temporary file an interrupted run left\n", f.string().c_str());
      dir.settle_checkpoints(o.resume, o.restart, stdout);
      dir.start(r.config);
      const experiment::ResultRow result = tasks::run_task(r, dir, o.out, o.resume);
      std::printf("[%zu/%zu] %s %s: %s\n", index, total, e.config.name().c_str(), r.id.c_str(),
                  experiment::summary(result).c_str());
    }
  print_tables(o.out, std::cout);
}

}  // namespace

void add_run_command(CLI::App& app) {
  auto o = std::make_shared<RunOptions>();
  auto* cmd = app.add_subcommand("run", "Run experiment or suite files (YAML), continuing an interrupted run");
  cmd->add_option("args", o->args, "experiment/suite files and key=value overrides (e.g. model.d_model=128)")
      ->required();
  cmd->add_option("--scale", o->scale, "a named scale of the files (e.g. smoke, paper)");
  cmd->add_option("--out", o->out, "output folder (default: runs)");
  cmd->add_flag("--dry-run", o->dry_run, "list the runs without training");
  auto* resume =
      cmd->add_flag("--resume", o->resume, "continue unfinished language-model runs from their newest checkpoint");
  cmd->add_flag("--restart", o->restart, "delete the checkpoints of unfinished runs and start them over")
      ->excludes(resume);
  cmd->callback([o] { run(*o); });
}

}  // namespace qkv::cli
