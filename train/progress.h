// Training progress on the console: on a terminal, one line redrawn in place with the loss,
// iterations per second and the time left; otherwise (logs, CI) one plain line every
// `interval` steps, so a log file stays readable. An optional log file gets the plain lines too.
#pragma once
#include <chrono>
#include <cstdio>
#include <string>

namespace qkv::train {

class Progress {
 public:
  Progress(std::string label, int64_t total_steps, int64_t interval, std::FILE* out = stdout,
           std::FILE* log = nullptr);
  // Reports step `step` (1-based) with its loss and learning rate.
  void update(int64_t step, double loss, double lr);
  // Ends the progress line with a summary (e.g. "val acc 0.973").
  void finish(const std::string& summary);
  double steps_per_second() const;

 private:
  std::string label_;
  int64_t total_, interval_, step_ = 0;
  std::FILE* out_;
  std::FILE* log_;
  bool tty_;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

std::string format_duration(double seconds);   // "1:05:09", "4:31", "0:07"

}  // namespace qkv::train
