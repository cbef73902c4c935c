// Training progress on the console: on a terminal, one line redrawn in place with the loss,
// iterations per second and the time left; otherwise (logs, CI) one plain line every
// `interval` steps, so a log file stays readable. An optional log file gets the plain lines too.
#pragma once
#include <chrono>
#include <cstdint>
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

// The steps, tokens and training time a logged rate (it/s, tokens/s, MFU) is computed from: those since the
// previous log line or, when a validation came in between, since that validation ended (its time
// and the steps before it are left out together, so the rate is never inflated by counting
// tokens whose time was dropped). Time points are passed in, so the bookkeeping is testable.
class ThroughputWindow {
 public:
  using Clock = std::chrono::steady_clock;
  struct Rate {
    int64_t tokens = 0;
    double seconds = 0;
    int64_t steps = 0;
    double per_second() const { return seconds > 0 ? double(tokens) / seconds : 0.0; }
  };
  explicit ThroughputWindow(Clock::time_point now) : start_(now) {}
  // One training step of `tokens` tokens.
  void add(int64_t tokens) {
    tokens_ += tokens;
    ++steps_;
  }
  // A log line: the window's tokens and seconds up to `now`; the next window starts there.
  Rate take(Clock::time_point now);
  // A validation (or anything that is not training) ended at `now`: the window restarts empty.
  void restart(Clock::time_point now);

 private:
  Clock::time_point start_;
  int64_t tokens_ = 0, steps_ = 0;
};

}  // namespace qkv::loops
