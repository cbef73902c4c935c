// qkvlab run FILE... [--scale NAME] [--out DIR] [--dry-run] [--resume | --restart] [key=value ...]
//               [--nproc N] [--dist-timeout SECONDS] [--dist-backend auto|mpi|nccl]
// Runs experiment files (or suite files listing them): every run of each sweep, skipping runs
// whose folder already holds a result, so an interrupted suite continues where it stopped;
// then prints the table of everything under the output folder. Each run's folder is locked while
// it runs; an unfinished run's checkpoints are continued (--resume) or discarded (--restart),
// never dropped silently.
//
// Data-parallel: started by mpirun/srun (or --nproc, which runs mpirun), every rank loads the same
// files and trains its shard of every run together with the others; rank 0 alone decides which
// runs to train, holds the folder lock and writes; the other ranks print nothing on stdout. An
// error on any rank stops every rank.
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>

#include "lab/cli/commands.h"
#include "lab/cli/mpi_launch.h"
#include "lab/experiment/experiment.h"
#include "lab/experiment/node.h"
#include "lab/experiment/overrides.h"
#include "lab/tasks/lm.h"
#include "lab/tasks/run_task.h"
#include "tensor/error.h"
#include "train/dist/consistency.h"

namespace qkv::cli {
namespace {

struct RunOptions {
  std::vector<std::string> args;  // files and key=value overrides, in any order
  std::string scale;
  std::string out = "runs";
  bool dry_run = false;
  bool resume = false;
  bool restart = false;
  int nproc = 0;  // > 0: relaunch under mpirun with this many ranks
  dist::Options dist;
};

bool is_suite(const std::string& path) {
  try {
    const experiment::Node n = experiment::load_yaml_file(path);
    return n.is_map() && n.find("suite");
  } catch (const Error&) {
    return false;  // load_experiment reports the error with its position
  }
}

// What rank 0 tells the others about one run: train it, skip it (complete), or the error that
// stopped rank 0 (e.g. unfinished checkpoints without --resume or --restart).
constexpr const char* kTrain = "train";
constexpr const char* kSkip = "skip";

// The experiment files named on the command line, suites expanded.
std::vector<std::string> experiment_files(const RunOptions& o, std::vector<std::string>& overrides) {
  std::vector<std::string> files;
  experiment::split_arguments(o.args, files, overrides);
  check<ValueError>(!files.empty(), "run: no experiment file given (e.g. qkvlab run experiments/synthetic/suite.yaml)");
  std::vector<std::string> experiments;
  for (const std::string& f : files) {
    if (!is_suite(f)) {
      experiments.push_back(f);
      continue;
    }
    for (const std::string& e : experiment::load_suite(f).experiments) experiments.push_back(e);
  }
  return experiments;
}

void run(const RunOptions& o, const std::vector<experiment::Experiment>& loaded, dist::Communicator& comm) {
  const bool writer = comm.rank() == 0;
  // A back end asked for by name is used even by a job of one rank (the GPU check's NCCL run).
  dist::Communicator* job = comm.size() > 1 || comm.backend() != "single" ? &comm : nullptr;
  // Validate everything before training anything.
  std::vector<std::string> missing_data;
  size_t total = 0, done = 0;
  for (const experiment::Experiment& e : loaded) {
    try {
      tasks::check_inputs(e.config);  // a missing dataset stops us before anything trains
    } catch (const Error& err) {
      if (!o.dry_run) throw;
      missing_data.push_back(err.what());  // a dry run lists the runs all the same, and says what is missing
    }
    for (const auto& r : e.runs) {
      ++total;
      const experiment::RunDir dir(o.out, r);
      const bool complete = dir.complete();
      done += complete;
      // Refused before anything trains: an unfinished run's checkpoints with neither flag.
      if (writer && !complete && !o.dry_run && !o.resume && !o.restart) dir.settle_checkpoints(false, false, stdout);
      if (job)
        dist::check_identical(comm, dist::digest(experiment::to_yaml(r.config)), cat("resolved config of ", r.id));
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
      std::optional<FolderLock> lock;
      std::string decision = kSkip;
      if (writer) {
        try {
          if (!dir.complete()) {
            lock.emplace(dir.lock());  // another process running it: an error naming that process
            if (!dir.complete()) {     // it may have finished between the check and the lock
              std::printf("[%zu/%zu] %s %s\n", index, total, e.config.name().c_str(), r.id.c_str());
              for (const auto& f : dir.remove_temporaries())
                std::printf("  removed %s, a temporary file an interrupted run left\n", f.string().c_str());
              dir.settle_checkpoints(o.resume, o.restart, stdout);
              dir.start(r.config);
              decision = kTrain;
            }
          }
        } catch (const Error& err) {
          if (!job) throw;
          decision = err.what();
        }
      }
      if (job) decision = comm.broadcast(decision, 0, cat("rank 0's decision on ", r.id));
      if (decision == kSkip) continue;
      if (decision != kTrain) throw ValueError(decision);
      const experiment::ResultRow result = tasks::run_task(r, dir, o.out, o.resume, job);
      std::printf("[%zu/%zu] %s %s: %s\n", index, total, e.config.name().c_str(), r.id.c_str(),
                  experiment::summary(result).c_str());
    }
  if (writer) print_tables(o.out, std::cout);
}

void run(const RunOptions& o) {
  if (o.nproc > 0 && !dist::launched_by_mpi()) relaunch_with_mpirun(o.nproc);
  std::vector<std::string> overrides;
  std::vector<experiment::Experiment> loaded;  // every file loaded before anything trains
  bool cuda = false;                           // picks nccl for --dist-backend auto
  for (const std::string& path : experiment_files(o, overrides)) {
    loaded.push_back(experiment::load_experiment(path, o.scale, overrides));
    cuda = cuda || Device(loaded.back().config.loop().device).is_cuda();
  }
  const std::unique_ptr<dist::Communicator> comm = dist::connect(o.dist, cuda);
  check<ValueError>(o.nproc == 0 || o.nproc == comm->size(), "run --nproc ", o.nproc, ": the launcher started ",
                    comm->size(), " ranks; drop --nproc when starting qkvlab with mpirun or srun");
  if (comm->size() == 1 && comm->backend() == "single") return run(o, loaded, *comm);
  if (comm->rank() != 0 && !std::freopen("/dev/null", "w", stdout))  // rank 0 alone prints
    comm->abort("cannot redirect stdout to /dev/null");
  try {
    run(o, loaded, *comm);
    comm->barrier("the end of the job");
  } catch (const std::exception& e) {
    comm->abort(cat("error: ", e.what()));  // stops every rank, never a hang
  }
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
  cmd->add_option("--nproc", o->nproc,
                  "data-parallel on this machine: run this command under `mpirun -np N` (printed); for several "
                  "nodes or Slurm call mpirun/srun yourself")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--dist-timeout", o->dist.timeout_seconds,
                  "data-parallel: seconds a collective may wait for the other ranks before the job stops with an "
                  "error naming it (default 300)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--dist-backend", o->dist.backend,
                  "data-parallel back end: auto (nccl for CUDA runs, mpi otherwise), mpi or nccl")
      ->check(CLI::IsMember({"auto", "single", "mpi", "nccl"}));
  cmd->callback([o] { run(*o); });
}

}  // namespace qkv::cli
