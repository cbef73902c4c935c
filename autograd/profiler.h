// An op-level profiler: with QKV_PROFILE=1 in the environment, call_op times every kernel and
// the process prints, at exit, the time per op (calls, total, share) to stderr. CPU kernels are
// timed with the host clock; CUDA kernels with CUDA events around the launch, so the table
// shows device time, read when the report is made. Off by default; when off it costs one branch
// per op.
#pragma once
#include <cstdint>
#include <string>

namespace qkv::autograd {

bool profiling_enabled();
// Turns timing on or off from code (QKV_PROFILE only sets the start state and the report at
// exit); tests count op calls this way.
void set_profiling_enabled(bool on);
void record_kernel_time(const char* op, const char* device, double seconds);
// A CUDA kernel between two events (tensor/cuda/cuda_runtime.h's record_event); the profiler
// owns and destroys them.
void record_cuda_kernel(const char* op, void* start_event, void* stop_event);
std::string profile_report();  // the table printed at exit
void reset_profile();
// Kernel calls of `op` on `device` ("cpu" or "cuda") recorded since the last reset_profile().
int64_t profiled_calls(const std::string& op, const std::string& device = "cpu");

}  // namespace qkv::autograd
