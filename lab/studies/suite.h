// The suite runner behind `qkvlab run`: every run of the experiment files (suite files expanded),
// skipping runs whose folder already holds a result, so an interrupted suite continues where it
// stopped; then the tables of everything under the output folder. Each run's folder is locked
// while it runs; an unfinished run's checkpoints are continued (resume) or discarded (restart),
// never dropped silently.
//
// Data-parallel: started by mpirun/srun, every rank loads the same files and trains its shard of
// every run together with the others; rank 0 alone decides which runs to train, holds the folder
// lock and writes; the other ranks print nothing on stdout. An error on any rank stops every rank.
#pragma once
#include <cstdio>
#include <string>
#include <vector>

#include "lab/experiment/experiment.h"
#include "train/dist/communicator.h"

namespace qkv::studies {

struct SuiteOptions {
  std::vector<std::string> files;      // experiment and suite files
  std::vector<std::string> overrides;  // key=value, applied to every file
  std::string scale;                   // a named scale of the files; empty: their defaults
  std::string out = "runs";
  bool dry_run = false;  // list the runs (and missing data) without training
  bool resume = false;   // continue unfinished runs from their newest checkpoint
  bool restart = false;  // delete unfinished runs' checkpoints and start them over
  int nproc = 0;         // ranks the user asked for; > 0: the launcher must have started that many
  dist::Options dist;
  std::string paper_dir;  // the paper's numbers for the closing tables; empty: no tables
};

// What one call did, counted over every run of the files.
struct SuiteCounts {
  size_t runs = 0, already_complete = 0, trained = 0;
};

// The experiments of the files, suites expanded, every file loaded (and checked) before
// anything trains.
std::vector<experiment::Experiment> load_suite_experiments(const SuiteOptions& o);

// Trains what is left of `loaded` on `comm` (size 1: this process alone), printing progress to
// `log`, then (rank 0, not a dry run) the tables to stdout.
SuiteCounts run_experiments(const std::vector<experiment::Experiment>& loaded, const SuiteOptions& o,
                            dist::Communicator& comm, std::FILE* log = stdout);

// The whole command: loads the files, connects to the other ranks when a launcher started this
// process, and runs; an error on any rank of a job stops every rank.
SuiteCounts run_suite(const SuiteOptions& o);

}  // namespace qkv::studies
