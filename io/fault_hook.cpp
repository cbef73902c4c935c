#include "io/fault_hook.h"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <optional>

namespace qkv {

namespace {

struct KillAt {
  std::optional<int64_t> step;  // none: any step
  std::string phase;
};

// QKV_FAULT_KILL_AT, parsed once; a malformed value is reported and ignored rather than thrown,
// so that a typo in a test cannot change what the program does.
const std::optional<KillAt>& kill_at() {
  static const std::optional<KillAt> k = []() -> std::optional<KillAt> {
    const char* v = std::getenv("QKV_FAULT_KILL_AT");
    if (!v || !*v) return std::nullopt;
    const std::string s(v);
    const size_t colon = s.find(':');
    KillAt k;
    if (colon != std::string::npos && colon > 0 && colon + 1 < s.size()) {
      k.phase = s.substr(colon + 1);
      const std::string step = s.substr(0, colon);
      if (step == "*") return k;
      if (step.find_first_not_of("0123456789") == std::string::npos && step.size() < 18) {
        k.step = std::stoll(step);
        return k;
      }
    }
    std::fprintf(stderr, "qkvlab: ignoring QKV_FAULT_KILL_AT='%s' (expected <step>:<phase> or *:<phase>)\n", v);
    return std::nullopt;
  }();
  return k;
}

thread_local const FaultWriteScope* innermost = nullptr;

// QKV_FAULT_RANK=r: only the process of rank r of a data-parallel job (its launcher's variable;
// 0 without one) reaches the fault points.
bool this_rank_faults() {
  static const bool yes = [] {
    const char* want = std::getenv("QKV_FAULT_RANK");
    if (!want || !*want) return true;
    const char* rank = nullptr;
    for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"})
      if ((rank = std::getenv(var))) break;
    return std::string(want) == (rank ? rank : "0");
  }();
  return yes;
}

}  // namespace

void fault_point(const std::string& phase, int64_t step) {
  const auto& k = kill_at();
  if (!k || k->phase != phase || (k->step && *k->step != step) || !this_rank_faults()) return;
  // QKV_FAULT_SIGNAL=SIGSTOP stops the process there instead (it continues on SIGCONT), so a test
  // can act while it holds its locks.
  static const bool stop = [] {
    const char* v = std::getenv("QKV_FAULT_SIGNAL");
    return v && std::string(v) == "SIGSTOP";
  }();
  if (stop) {
    ::kill(::getpid(), SIGSTOP);
    return;
  }
  ::kill(::getpid(), SIGKILL);
  ::pause();
}

FaultWriteScope::FaultWriteScope(std::string phase, int64_t step)
    : outer_(innermost), phase_(std::move(phase)), step_(step) {
  innermost = this;
}

FaultWriteScope::~FaultWriteScope() { innermost = outer_; }

void fault_point_in_write() {
  if (innermost) fault_point(innermost->phase_, innermost->step_);
}

}  // namespace qkv
