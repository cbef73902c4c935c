#include "bench/torch_session.h"

#include <fcntl.h>
#include <omp.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <nlohmann/json.hpp>

#include "tensor/error.h"

extern char** environ;

namespace qkv::bench {

TorchSession::TorchSession(const std::string& args) {
  std::signal(SIGPIPE, SIG_IGN);  // a twin that dies makes our write fail, not kill the benchmark
  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) {
    note_ = "cannot create pipes for /usr/bin/python3";
    return;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  const std::string script = cat(QKV_SOURCE_DIR, "/bench/torch_step.py");
  const std::string cmd =
      cat("exec /usr/bin/python3 ", script, " ", args, " --threads ", omp_get_max_threads(), " --serve");
  const char* argv[] = {"/bin/sh", "-c", cmd.c_str(), nullptr};
  const int rc = posix_spawn(&pid_, "/bin/sh", &fa, nullptr, const_cast<char* const*>(argv), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(in[0]);
  close(out[1]);
  to_child_ = in[1];
  from_child_ = out[0];
  if (rc != 0) {
    pid_ = -1;
    stop("cannot start /usr/bin/python3");
    return;
  }
  const std::string line = read_line();
  try {
    const auto j = nlohmann::json::parse(line);
    if (!j.value("ready", false)) {
      stop(j.value("error", "PyTorch run failed"));
      return;
    }
    note_ = cat("PyTorch ", j["torch"].get<std::string>(), ", ", j["threads"].get<int>(), " threads, ",
                j["parameters"].get<int64_t>(), " parameters");
  } catch (const std::exception&) { stop("PyTorch not available (/usr/bin/python3 with python3-torch)"); }
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

std::string TorchSession::read_line() {
  for (;;) {
    const size_t nl = pending_.find('\n');
    if (nl != std::string::npos) {
      std::string line = pending_.substr(0, nl);
      pending_.erase(0, nl + 1);
      return line;
    }
    char buf[4096];
    const ssize_t n = read(from_child_, buf, sizeof buf);
    if (n <= 0) return std::exchange(pending_, "");
    pending_.append(buf, size_t(n));
  }
}

std::vector<double> TorchSession::steps(int n) {
  if (!ok()) return {};
  const std::string request = cat(n, "\n");
  if (write(to_child_, request.data(), request.size()) != ssize_t(request.size())) {
    stop("the PyTorch twin stopped");
    return {};
  }
  try {
    return nlohmann::json::parse(read_line())["times_ms"].get<std::vector<double>>();
  } catch (const std::exception&) {
    stop("the PyTorch twin stopped");
    return {};
  }
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

}  // namespace qkv::bench
