#include "bench/torch_session.h"

#include <fcntl.h>
#include <omp.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iomanip>
#include <nlohmann/json.hpp>

#include "tensor/error.h"

extern char** environ;

namespace qkv::bench {

namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

}  // namespace

TorchSession::TorchSession(const Peer& peer, Workload workload, const std::string& args, bool wait)
    : spec_(peer.spec), name_(peer.spec) {
  std::signal(SIGPIPE, SIG_IGN);  // a twin that dies makes our write fail, not kill the benchmark
  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) {
    note_ = cat("cannot create pipes for ", peer.python);
    return;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  // The twin's own messages (a compiler's error, a traceback) where the caller keeps its logs.
  const char* log = std::getenv("QKV_PEER_LOG");
  posix_spawn_file_actions_addopen(&fa, 2, log && *log ? log : "/dev/null", O_WRONLY | O_CREAT | O_APPEND, 0644);
  const std::string cmd =
      cat(peer_command(peer, workload), " ", args, " --threads ", omp_get_max_threads(), " --serve");
  const char* argv[] = {"/bin/sh", "-c", cmd.c_str(), nullptr};
  started_s_ = now_s();
  const int rc = posix_spawn(&pid_, "/bin/sh", &fa, nullptr, const_cast<char* const*>(argv), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(in[0]);
  close(out[1]);
  to_child_ = in[1];
  from_child_ = out[0];
  if (rc != 0) {
    pid_ = -1;
    stop(cat("cannot start ", peer.python));
    return;
  }
  if (wait) wait_ready();
}

void TorchSession::wait_ready(double timeout_s) {
  if (ready_ || !ok()) return;
  bool timed_out = false;
  const std::string line = read_line(timeout_s > 0 ? now_s() + timeout_s : 0, &timed_out);
  if (timed_out) {
    kill(pid_, SIGKILL);  // still building or compiling: it would not notice its stdin closing
    stop(
        cat(spec_, " was not ready ", int(now_s() - started_s_), " s after its start (still warming up or compiling)"));
    return;
  }
  try {
    const auto j = nlohmann::json::parse(line);
    if (!j.value("ready", false)) {
      stop(j.value("error", cat(spec_, " failed")));
      return;
    }
    ready_ = true;
    name_ = j["name"].get<std::string>();
    note_ = cat(j["mode"].get<std::string>(), ", ", j["threads"].get<int>(), " threads, ",
                j["parameters"].get<int64_t>(), " parameters");
    for (const char* extra : {"device", "precision", "attention", "optimizer"})  // what a GPU twin runs
      if (j.contains(extra) && j[extra].is_string()) note_ += cat(", ", j[extra].get<std::string>());
    precisions_ = j.value("precisions", std::vector<std::string>{"fp32"});
    unsupported_ = j.value("unsupported", "");
  } catch (const std::exception&) { stop(cat(spec_, " failed before it was ready (run its twin by hand)")); }
}

bool TorchSession::serves(const std::string& precision, std::string* why) const {
  if (!ok() || !ready_) {
    if (why) *why = note_;
    return false;
  }
  for (const std::string& p : precisions_)
    if (p == precision) return true;
  if (why) *why = unsupported_.empty() ? cat("no ", precision, " here") : unsupported_;
  return false;
}

TorchSession::~TorchSession() { stop(note_); }

void TorchSession::stop(const std::string& why) {
  note_ = why;
  if (to_child_ >= 0) close(to_child_);  // the twin's stdin ends: it exits
  if (from_child_ >= 0) close(from_child_);
  to_child_ = from_child_ = -1;
  if (pid_ > 0) waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

std::string TorchSession::read_line(double deadline_s, bool* timed_out) {
  for (;;) {
    const size_t nl = pending_.find('\n');
    if (nl != std::string::npos) {
      std::string line = pending_.substr(0, nl);
      pending_.erase(0, nl + 1);
      return line;
    }
    if (deadline_s > 0) {
      pollfd p{from_child_, POLLIN, 0};
      const double left = deadline_s - now_s();
      const int rc = left > 0 ? poll(&p, 1, int(std::min(left, 3600.0) * 1000) + 1) : 0;
      if (rc == 0) {
        if (timed_out) *timed_out = true;
        return "";
      }
      if (rc < 0 && errno == EINTR) continue;
    }
    char buf[4096];
    const ssize_t n = read(from_child_, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return std::exchange(pending_, "");
    pending_.append(buf, size_t(n));
  }
}

std::vector<double> TorchSession::steps(int n, const std::string& precision) {
  wait_ready();
  if (!ok()) return {};
  const std::string request = cat(n, precision.empty() ? "" : " ", precision, "\n");
  if (write(to_child_, request.data(), request.size()) != ssize_t(request.size())) {
    stop(cat("the ", name_, " twin stopped"));
    return {};
  }
  const std::string reply = read_line();
  try {
    const auto j = nlohmann::json::parse(reply);
    if (j.contains("times_ms")) {
      if (j.contains("peak_bytes")) peak_bytes_ = j["peak_bytes"].get<int64_t>();
      return j["times_ms"].get<std::vector<double>>();
    }
    stop(j.value("error", cat("the ", name_, " twin stopped")));
  } catch (const std::exception&) { stop(cat("the ", name_, " twin stopped")); }
  return {};
}

Contestant timed(std::function<void()> step) {
  return [step = std::move(step)](int n) {
    std::vector<double> ms;
    for (int i = 0; i < n; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      step();
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    return ms;
  };
}

std::vector<std::unique_ptr<TorchSession>> add_step_twins(const std::vector<Peer>& peers, const std::string& args,
                                                          std::vector<Contestant>& contestants) {
  std::vector<std::unique_ptr<TorchSession>> twins;
  for (const Peer& peer : peers) {
    twins.push_back(std::make_unique<TorchSession>(peer, Workload::step, args));
    contestants.push_back(contestant(*twins.back()));
  }
  return twins;
}

void print_step_peers(const std::vector<Peer>& peers) {
  std::printf(
      "peers: %s\nspeedup: a peer's median step over qkvlab's, from the same turns (below 1: qkvlab is slower)\n",
      describe_peers(peers).c_str());
}

std::vector<std::vector<double>> take_turns(const std::vector<Contestant>& contestants, int steps, int rounds) {
  const int per_round = std::max(1, steps / rounds);
  std::vector<std::vector<double>> times(contestants.size());
  std::vector<bool> failed(contestants.size(), false);
  for (int r = 0; r < rounds; ++r)
    for (size_t c = 0; c < contestants.size(); ++c) {
      if (failed[c]) continue;
      const std::vector<double> t = contestants[c](per_round + 1);
      if (t.empty()) failed[c] = true;
      else times[c].insert(times[c].end(), t.begin() + 1, t.end());  // the settling step untimed
    }
  for (size_t c = 0; c < contestants.size(); ++c)
    if (failed[c]) times[c].clear();  // a contestant that died part-way reports nothing
  return times;
}

double median_of(std::vector<double> ms) {
  if (ms.empty()) return -1;
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

double best_of(const std::vector<double>& ms) { return ms.empty() ? -1 : *std::min_element(ms.begin(), ms.end()); }

void print_contestant_header(const char* column) {
  std::printf("  %-22s  %-5s  %10s  %10s  %8s\n", "contestant", column, "median ms", "best ms", "speedup");
}

void print_contestant(const std::string& name, const std::string& precision, const std::vector<double>& ms,
                      double mine_ms, const std::string& note) {
  const std::string median = ms.empty() ? "-" : cat(std::fixed, std::setprecision(1), median_of(ms));
  const std::string best = ms.empty() ? "-" : cat(std::fixed, std::setprecision(1), best_of(ms));
  const std::string speedup =
      ms.empty() || mine_ms <= 0 ? "-" : cat(std::fixed, std::setprecision(2), median_of(ms) / mine_ms, "x");
  std::printf("  %-22s  %-5s  %10s  %10s  %8s%s\n", name.c_str(), precision.c_str(), median.c_str(), best.c_str(),
              speedup.c_str(), note.empty() ? "" : cat("  (", note, ")").c_str());
}

}  // namespace qkv::bench
