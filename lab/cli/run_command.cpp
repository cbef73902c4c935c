// qkvlab run FILE... [--scale NAME] [--out DIR] [--dry-run] [--resume | --restart] [key=value ...]
//               [--nproc N] [--dist-timeout SECONDS] [--dist-backend auto|mpi|nccl]
// The suite runner (lab/studies/suite.h); --nproc relaunches the command under mpirun first.
#include "lab/cli/commands.h"
#include "lab/cli/mpi_launch.h"
#include "lab/experiment/overrides.h"
#include "lab/studies/suite.h"

namespace qkv::cli {

void add_run_command(CLI::App& app) {
  auto args = std::make_shared<std::vector<std::string>>();  // files and key=value overrides, in any order
  auto o = std::make_shared<studies::SuiteOptions>();
  o->paper_dir = default_paper_tables();
  auto* cmd = app.add_subcommand("run", "Run experiment or suite files (YAML), continuing an interrupted run");
  cmd->add_option("args", *args, "experiment/suite files and key=value overrides (e.g. model.d_model=128)")->required();
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
  cmd->callback([args, o] {
    if (o->nproc > 0 && !dist::launched_by_mpi()) relaunch_with_mpirun(o->nproc);
    experiment::split_arguments(*args, o->files, o->overrides);
    studies::run_suite(*o);
  });
}

}  // namespace qkv::cli
