// RunDir: the output folder of one run, <out>/<experiment name>/<run id>/, holding config.yaml
// (the resolved config), meta.json (version, commit, host, CPU, start time) and, once the run
// has finished, result.json. A suite that was interrupted skips the runs that are complete.
// While a run writes to its folder, the folder is locked (.qkvlab.lock, io/folder_lock.h).
#pragma once
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/folder_lock.h"
#include "lab/experiment/result.h"
#include "lab/experiment/sweep.h"

namespace qkv::experiment {

class RunDir {
 public:
  RunDir(const std::filesystem::path& out, const std::string& experiment, const std::string& run_id);
  RunDir(const std::filesystem::path& out, const Run& run);  // experiment = run.config.name

  const std::filesystem::path& path() const { return path_; }

  // result.json exists and parses as a JSON object.
  bool complete() const;
  // Creates the folder and takes its lock (io/folder_lock.h) while the returned object lives:
  // IOError naming the holder (pid, host, start time, command) when another process has it.
  FolderLock lock() const;
  // Removes the temporary files killed writes left in the folder and below it (checkpoints/)
  // and returns them. Call it holding the lock.
  std::vector<std::filesystem::path> remove_temporaries() const;
  // An unfinished run's checkpoints (train/loops/lm_checkpoint.h) are never deleted silently:
  // with `resume` they stay for the run to continue from; with `restart` they are deleted, saying
  // which on `log`; with neither, ValueError naming the folder, the newest checkpoint and the
  // options --resume and --restart. A converted model's folder (convert.json beside its
  // checkpoint) is refused either way. Call it holding the lock.
  void settle_checkpoints(bool resume, bool restart, std::FILE* log) const;
  // Creates the folder and writes config.yaml and meta.json (both atomically).
  void start(const Config& resolved) const;
  // Writes result.json atomically; from then on the run is complete.
  void write_result(const ResultRow& result) const;
  // result.json, every field checked; IOError naming the file and field when it is damaged.
  ResultRow read_result() const;

 private:
  std::filesystem::path path_;
};

// The files beside a model folder's checkpoint when a command made it instead of training
// (qkvlab import, convert): config.yaml (`resolved`), meta.json, and `record_name` (import.json,
// convert.json: where the model came from), each written atomically; the folder must exist.
void write_model_folder_files(const std::filesystem::path& folder, const Config& resolved,
                              const std::string& record_name, const nlohmann::json& record);

// Where and with what a run ran: qkvlab version, git commit of the source tree ("unknown" when
// not available), hostname, CPU model, core count, start time (UTC, ISO 8601).
nlohmann::json run_meta();

}  // namespace qkv::experiment
