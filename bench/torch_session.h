// A PyTorch twin kept running beside a qkvlab benchmark (bench/torch_step.py --serve), and the
// turns the two take: a few steps of each contestant in turn, repeated, so that every median comes
// from the same stretch of the machine's time. On a shared machine whose speed drifts by 20% within
// a minute, the ratio of two medians taken one after the other measures the drift as much as the
// code.
#pragma once
#include <functional>
#include <string>
#include <sys/types.h>
#include <vector>

namespace qkv::bench {

class TorchSession {
 public:
  // Starts Debian's /usr/bin/python3 on bench/torch_step.py with `args` (e.g. "vit --d-model 64"),
  // the machine's thread count and --serve, and waits until its model is built and warmed up.
  // ok() is false, with note() saying why, when PyTorch is missing or the script fails.
  explicit TorchSession(const std::string& args);
  ~TorchSession();
  TorchSession(const TorchSession&) = delete;
  TorchSession& operator=(const TorchSession&) = delete;

  bool ok() const { return pid_ > 0; }
  // "PyTorch 1.13.0, 2 threads, 124439808 parameters", or why it is not running.
  const std::string& note() const { return note_; }
  // The ms of each of n training steps; empty (and ok() false) when the twin has died.
  std::vector<double> steps(int n);

 private:
  void stop(const std::string& why);
  std::string read_line();
  pid_t pid_ = -1;
  int to_child_ = -1, from_child_ = -1;
  std::string note_, pending_;
};

// A contestant runs n training steps and returns the ms of each (empty: it could not run).
using Contestant = std::function<std::vector<double>(int n)>;

// A contestant that runs `step` (one training step) n times and times each run.
Contestant timed(std::function<void()> step);

// The twin as a contestant (the session must outlive it).
inline Contestant contestant(TorchSession& twin) {
  return [&twin](int n) { return twin.steps(n); };
}

// `rounds` rounds in which every contestant in turn runs steps / rounds steps (at least one);
// each contestant's step times over all rounds (empty for one that could not run). Every turn
// starts with one more step, run but not timed: it finds the caches (and the TLB) as the other
// contestant left them, and would time the switch rather than the step (the encoder's first
// step of a two-step turn was the slower one in 8 of 10 turns beside PyTorch).
std::vector<std::vector<double>> take_turns(const std::vector<Contestant>& contestants, int steps, int rounds);

// Median and best (minimum) of step times; -1 for none.
double median_of(std::vector<double> ms);
double best_of(const std::vector<double>& ms);

}  // namespace qkv::bench
