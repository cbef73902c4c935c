#include "lab/studies/suite.h"

#include <iostream>
#include <memory>
#include <optional>
#include <sstream>

#include "lab/experiment/node.h"
#include "lab/experiment/run_dir.h"
#include "lab/report/folder_tables.h"
#include "lab/tasks/protocol.h"
#include "lab/tasks/run_task.h"
#include "tensor/error.h"
#include "train/dist/consistency.h"

namespace qkv::studies {

namespace {

bool is_suite(const std::string& path) {
  try {
    const experiment::Node n = experiment::load_yaml_file(path);
    return n.is_map() && n.find("suite");
  } catch (const Error&) {
    return false;  // load_experiment reports the error with its position
  }
}

// What rank 0 tells the others about one run: train it, skip it (complete), or the error that
// stopped rank 0 (e.g. unfinished checkpoints without resume or restart).
constexpr const char* kTrain = "train";
constexpr const char* kSkip = "skip";

// Refuses a run before anything trains, or lists what a dry run would do.
struct Plan {
  std::vector<std::string> missing_data;
  size_t total = 0, done = 0;
};

Plan plan(const std::vector<experiment::Experiment>& loaded, const SuiteOptions& o, dist::Communicator& comm,
          dist::Communicator* job, std::FILE* log) {
  Plan p;
  for (const experiment::Experiment& e : loaded) {
    try {
      tasks::check_inputs(e.config);  // a missing dataset stops us before anything trains
    } catch (const Error& err) {
      if (!o.dry_run) throw;
      p.missing_data.push_back(err.what());  // a dry run lists the runs all the same, and says what is missing
    }
    for (const auto& r : e.runs) {
      ++p.total;
      const experiment::RunDir dir(o.out, r);
      const bool complete = dir.complete();
      p.done += complete;
      // Refused before anything trains: an unfinished run's checkpoints with neither flag.
      if (comm.rank() == 0 && !complete && !o.dry_run && !o.resume && !o.restart)
        dir.settle_checkpoints(false, false, log);
      if (job)
        dist::check_identical(comm, dist::digest(experiment::to_yaml(r.config)), cat("resolved config of ", r.id));
    }
  }
  return p;
}

// Rank 0's decision on one run, taken under the run folder's lock (held in `lock`).
std::string decide(const experiment::Experiment& e, const experiment::Run& r, experiment::RunDir& dir,
                   const SuiteOptions& o, std::optional<FolderLock>& lock, const std::string& progress,
                   std::FILE* log) {
  if (dir.complete()) return kSkip;
  lock.emplace(dir.lock());          // another process running it: an error naming that process
  if (dir.complete()) return kSkip;  // it may have finished between the check and the lock
  std::fprintf(log, "%s %s %s\n", progress.c_str(), e.config.name().c_str(), r.id.c_str());
  for (const auto& f : dir.remove_temporaries())
    std::fprintf(log, "  removed %s, a temporary file an interrupted run left\n", f.string().c_str());
  dir.settle_checkpoints(o.resume, o.restart, log);
  dir.start(r.config);
  return kTrain;
}

}  // namespace

std::vector<experiment::Experiment> load_suite_experiments(const SuiteOptions& o) {
  check<ValueError>(!o.files.empty(),
                    "run: no experiment file given (e.g. qkvlab run experiments/synthetic/suite.yaml)");
  std::vector<experiment::Experiment> loaded;
  for (const std::string& f : o.files) {
    if (!is_suite(f)) {
      loaded.push_back(experiment::load_experiment(f, o.scale, o.overrides));
      continue;
    }
    for (const std::string& e : experiment::load_suite(f).experiments)
      loaded.push_back(experiment::load_experiment(e, o.scale, o.overrides));
  }
  return loaded;
}

SuiteCounts run_experiments(const std::vector<experiment::Experiment>& loaded, const SuiteOptions& o,
                            dist::Communicator& comm, std::FILE* log) {
  const bool writer = comm.rank() == 0;
  // A back end asked for by name is used even by a job of one rank (the GPU check's NCCL run).
  dist::Communicator* job = comm.size() > 1 || comm.backend() != "single" ? &comm : nullptr;
  const Plan p = plan(loaded, o, comm, job, log);
  SuiteCounts counts{p.total, p.done, 0};
  std::fprintf(log, "qkvlab run: %zu experiment(s), %zu run(s), %zu already complete, output in %s\n", loaded.size(),
               p.total, p.done, o.out.c_str());
  for (const auto& e : loaded)
    std::fprintf(log, "  %s protocol: %s\n", e.config.name().c_str(), tasks::protocol_summary(e.config).c_str());
  if (o.dry_run) {
    for (const std::string& m : p.missing_data)
      std::fprintf(log, "  missing data (a real run stops here): %s\n", m.c_str());
    for (const auto& e : loaded)
      for (const auto& r : e.runs)
        std::fprintf(log, "  %s/%s%s\n", e.config.name().c_str(), r.id.c_str(),
                     experiment::RunDir(o.out, r).complete() ? " (complete)" : "");
    return counts;
  }
  size_t index = 0;
  for (const auto& e : loaded)
    for (const auto& r : e.runs) {
      const std::string progress = cat("[", ++index, "/", p.total, "]");
      experiment::RunDir dir(o.out, r);
      std::optional<FolderLock> lock;
      std::string decision = kSkip;
      if (writer) {
        try {
          decision = decide(e, r, dir, o, lock, progress, log);
        } catch (const Error& err) {
          if (!job) throw;
          decision = err.what();
        }
      }
      if (job) decision = comm.broadcast(decision, 0, cat("rank 0's decision on ", r.id));
      if (decision == kSkip) continue;
      if (decision != kTrain) throw ValueError(decision);
      const experiment::ResultRow result = tasks::run_task(r, dir, o.out, o.resume, job);
      ++counts.trained;
      std::fprintf(log, "%s %s %s: %s\n", progress.c_str(), e.config.name().c_str(), r.id.c_str(),
                   experiment::summary(result).c_str());
    }
  if (writer && !o.paper_dir.empty()) {
    std::ostringstream tables;
    report::write_folder_tables(o.out, o.paper_dir, tables, std::cerr);
    std::fputs(tables.str().c_str(), log);
  }
  return counts;
}

SuiteCounts run_suite(const SuiteOptions& o) {
  const std::vector<experiment::Experiment> loaded = load_suite_experiments(o);
  bool cuda = false;  // picks nccl for dist.backend auto
  for (const experiment::Experiment& e : loaded) cuda = cuda || e.config.loop().device.is_cuda();
  const std::unique_ptr<dist::Communicator> comm = dist::connect(o.dist, cuda);
  check<ValueError>(o.nproc == 0 || o.nproc == comm->size(), "run --nproc ", o.nproc, ": the launcher started ",
                    comm->size(), " ranks; drop --nproc when starting qkvlab with mpirun or srun");
  if (comm->size() == 1 && comm->backend() == "single") return run_experiments(loaded, o, *comm);
  if (comm->rank() != 0 && !std::freopen("/dev/null", "w", stdout))  // rank 0 alone prints
    comm->abort("cannot redirect stdout to /dev/null");
  SuiteCounts counts;
  try {
    counts = run_experiments(loaded, o, *comm);
    comm->barrier("the end of the job");
  } catch (const std::exception& e) {
    comm->abort(cat("error: ", e.what()));  // stops every rank, never a hang
  }
  return counts;
}

}  // namespace qkv::studies
