// A peer's twin kept running beside a qkvlab benchmark (bench/torch_step.py --serve, its JAX twin,
// the decode twins), and the turns the contestants take: a few steps of each in turn, repeated, so
// that every median comes from the same stretch of the machine's time. On a shared machine whose
// speed drifts by 20% within a minute, the ratio of two medians taken one after the other measures
// the drift as much as the code.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <sys/types.h>
#include <vector>

#include "bench/torch_runner.h"

namespace qkv::bench {

class TorchSession {
 public:
  // Starts the peer's twin of `workload` with `args` (e.g. "vit --d-model 64"), the machine's
  // thread count and --serve, and (with `wait`) waits until its model is built and warmed up
  // (compiled). ok() is false, with note() saying why, when the framework is missing or the twin
  // fails. The twin's stderr goes to the file $QKV_PEER_LOG names (appended), else nowhere.
  TorchSession(const Peer& peer, Workload workload, const std::string& args, bool wait = true);
  ~TorchSession();
  TorchSession(const TorchSession&) = delete;
  TorchSession& operator=(const TorchSession&) = delete;

  // For a session started without waiting: waits until the twin is ready, at most `timeout_s`
  // seconds (0: no limit); a twin not ready by then is stopped (ok() false, note() saying so).
  // Several twins started together warm up (compile) side by side, and beside qkvlab's own set-up.
  void wait_ready(double timeout_s = 0);

  bool ok() const { return pid_ > 0; }
  // "PyTorch 2.5.1", "torch.compile 2.5.1", "JAX 0.4.35"; the peer's spec when it did not start.
  const std::string& name() const { return name_; }
  // "compile, 2 threads, 124439808 parameters", or why it is not running.
  const std::string& note() const { return note_; }
  // Whether the twin serves `precision` (fp32, bf16), and if not, why.
  bool serves(const std::string& precision, std::string* why = nullptr) const;
  // The ms of each of n steps (in `precision`, the twin's first when empty); empty (and ok() false)
  // when the twin has died.
  std::vector<double> steps(int n, const std::string& precision = "");
  // The device memory peak the twin last reported (torch.cuda.max_memory_allocated since its
  // warm-up), -1 when it reports none (a CPU twin).
  int64_t peak_bytes() const { return peak_bytes_; }

 private:
  void stop(const std::string& why);
  // The next line of the twin's stdout; "" once it has ended, or when `deadline_s` (a
  // steady-clock time in seconds, 0: none) passes first (then *timed_out is set).
  std::string read_line(double deadline_s = 0, bool* timed_out = nullptr);
  pid_t pid_ = -1;
  int to_child_ = -1, from_child_ = -1;
  bool ready_ = false;
  double started_s_ = 0;  // when the twin was started (steady clock, seconds)
  int64_t peak_bytes_ = -1;
  std::string spec_, name_, note_, pending_, unsupported_;
  std::vector<std::string> precisions_;
};

// A contestant runs n training steps and returns the ms of each (empty: it could not run).
using Contestant = std::function<std::vector<double>(int n)>;

// A contestant that runs `step` (one training step) n times and times each run.
Contestant timed(std::function<void()> step);

// The twin as a contestant, running `precision` (the session must outlive it).
inline Contestant contestant(TorchSession& twin, const std::string& precision = "") {
  return [&twin, precision](int n) { return twin.steps(n, precision); };
}

// A twin of the training step for each peer, started with `args` (its first precision), each added
// to `contestants`; the twins must outlive them.
std::vector<std::unique_ptr<TorchSession>> add_step_twins(const std::vector<Peer>& peers, const std::string& args,
                                                          std::vector<Contestant>& contestants);
// The lines above a step benchmark's tables: the peers and what the speedup column means.
void print_step_peers(const std::vector<Peer>& peers);

// `rounds` rounds in which every contestant in turn runs steps / rounds steps (at least one);
// each contestant's step times over all rounds (empty for one that could not run). Every turn
// starts with one more step, run but not timed: it finds the caches (and the TLB) as the other
// contestant left them, and would time the switch rather than the step (the encoder's first
// step of a two-step turn was the slower one in 8 of 10 turns beside PyTorch).
std::vector<std::vector<double>> take_turns(const std::vector<Contestant>& contestants, int steps, int rounds);

// Median and best (minimum) of step times; -1 for none.
double median_of(std::vector<double> ms);
double best_of(const std::vector<double>& ms);

// The header of the contestant lines below, then a line per contestant: name, precision (or
// variant), median and best ms, the speedup (theirs / mine: how many times qkvlab is faster; below
// 1, qkvlab is slower) and a note, the fields at least two spaces apart (bench-report.sh reads them).
void print_contestant_header(const char* column = "prec");
void print_contestant(const std::string& name, const std::string& precision, const std::vector<double>& ms,
                      double mine_ms, const std::string& note);

}  // namespace qkv::bench
