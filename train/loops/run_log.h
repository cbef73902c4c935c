// The log of one training run, shared by both loops: metrics.jsonl (typed records, one per
// line, flushed as written) and train.log (the plain progress lines) in the run folder, and the
// progress line on the console. Opened by the constructor, closed by the destructor.
//
// A fresh run removes the files an earlier attempt left; a resumed run keeps train.log and cuts
// metrics.jsonl back to the length its checkpoint recorded, so the records after the checkpoint
// are written again by the resumed steps and the file reads as one uninterrupted run.
#pragma once
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "train/loops/metrics.h"
#include "train/loops/progress.h"

namespace qkv::loops {

class RunLog {
 public:
  struct Options {
    std::filesystem::path dir;  // the run folder; empty: console only, no files
    std::string label;          // progress line prefix
    int64_t total_steps = 0, log_every = 1;
    std::optional<uint64_t> resume_bytes;  // resuming: metrics.jsonl's length at the checkpoint
  };
  explicit RunLog(const Options& options);
  ~RunLog();
  RunLog(const RunLog&) = delete;
  RunLog& operator=(const RunLog&) = delete;

  void record(const MetricsRecord& r);                       // appended to metrics.jsonl and flushed
  uint64_t metrics_bytes() const { return metrics_bytes_; }  // metrics.jsonl's length (0 without a folder)
  Progress& progress() { return *progress_; }

  static std::filesystem::path metrics_file(const std::filesystem::path& dir) { return dir / "metrics.jsonl"; }
  static std::filesystem::path text_file(const std::filesystem::path& dir) { return dir / "train.log"; }

 private:
  std::FILE* metrics_ = nullptr;
  std::FILE* text_ = nullptr;
  std::string metrics_path_;
  uint64_t metrics_bytes_ = 0;
  std::unique_ptr<Progress> progress_;
};

}  // namespace qkv::loops
