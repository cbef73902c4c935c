// A testing hook for the fault-injection suite (tests/fault/): with QKV_FAULT_KILL_AT=<step>:<phase>
// in the environment, the process sends itself SIGKILL when it reaches fault_point(phase, step),
// as if killed from outside at exactly that point ("*" as the step matches every step); with
// QKV_FAULT_SIGNAL=SIGSTOP it stops there instead; with QKV_FAULT_RANK=r only rank r of a
// data-parallel job does. Without the variable a fault point costs one branch. docs/TESTING.md
// lists the phases.
#pragma once
#include <cstdint>
#include <string>

namespace qkv {

void fault_point(const std::string& phase, int64_t step);

// While one is alive on this thread, every atomic write (atomic_file.h) calls
// fault_point(phase, step) after writing its temporary file and before renaming it over the
// target, so a kill there leaves the temporary file behind.
class FaultWriteScope {
 public:
  FaultWriteScope(std::string phase, int64_t step);
  ~FaultWriteScope();
  FaultWriteScope(const FaultWriteScope&) = delete;
  FaultWriteScope& operator=(const FaultWriteScope&) = delete;

 private:
  const FaultWriteScope* outer_;
  std::string phase_;
  int64_t step_;
  friend void fault_point_in_write();
};

// The atomic writer's fault point: fault_point of the innermost FaultWriteScope, if any.
void fault_point_in_write();

}  // namespace qkv
