// Training progress on the console: on a terminal, one line redrawn in place with the loss,
// iterations per second and the time left; otherwise (logs, CI) one plain line every
// `interval` steps, so a log file stays readable. An optional log file gets the plain lines too.
#pragma once
#include <chrono>
#include <cstdio>
#include <string>

namespace qkv::loops {

class Progress {
 public:
  Progress(std::string label, int64_t total_steps, int64_t interval, std::FILE* out = stdout, std::FILE* log = nullptr);
  // Reports step `step` (1-based) with its loss and learning rate.
  void update(int64_t step, double loss, double lr);
  // Steps before `step` were done earlier (a resumed run): rates and ETA count from here.
  void resume_at(int64_t step) { base_ = step_ = step; }
  // Text appended to the following lines (e.g. "12,345 tok/s MFU 31.2%").
  void set_note(std::string note) { note_ = std::move(note); }
  // A line of its own (e.g. a validation result), on the console and in the log.
  void message(const std::string& text);
  // Ends the progress line with a summary (e.g. "val acc 0.973").
  void finish(const std::string& summary);
  double steps_per_second() const;

 private:
  std::string label_;
  int64_t total_, interval_, step_ = 0, base_ = 0;
  std::string note_;
  std::FILE* out_;
  std::FILE* log_;
  bool tty_;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace qkv::loops
