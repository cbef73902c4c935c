// An op-level profiler: with QKV_PROFILE=1 in the environment, call_op times every kernel and
// the process prints, at exit, the time per op (calls, total, share) to stderr. Off by default;
// when off it costs one branch per op.
#pragma once
#include <string>

namespace qkv::autograd {

bool profiling_enabled();
void record_kernel_time(const char* op, const char* device, double seconds);
std::string profile_report();   // the table printed at exit
void reset_profile();

}  // namespace qkv::autograd
