// What bench_kernels' measurements share: timing functions in turns (best of N, each run followed
// by a device synchronize, so machine noise hits every side alike), the number of runs a size
// affords, and the sampled checks against the CPU that come before a GPU result is trusted.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace qkv::bench {

// Waits for the device's queued work (nothing on the CPU).
void sync(const Device& d);

// Best of `reps` timings of each function, run alternately after one warm-up call each.
std::vector<double> best_seconds(const std::vector<std::function<void()>>& fns, int reps, const Device& dev);

// Repetitions for work of `flops` per run: the full count on a GPU, fewer (at least 2) on the
// CPU where one large run already takes a second.
int reps_for(double flops, int reps, const Device& dev);

// ||got - ref|| / ||ref|| over the elements of two tensors of one shape (any devices and float
// dtypes; compared in float64 on the CPU); infinite when a value is not finite.
double relative_error(const Tensor& got, const Tensor& ref);

// Records one sampled check: prints `what`'s relative error against `tolerance` and counts a
// failure above it (a NaN fails too).
bool record_check(const std::string& what, double error, double tolerance);
// The relative error of got against ref, recorded with the dtype's tolerance (1e-4 float32, 1e-2
// bf16/f16).
void check_block(const std::string& what, const Tensor& got, const Tensor& ref, DType dt);
// How many recorded checks failed so far.
int failed_checks();

}  // namespace qkv::bench
