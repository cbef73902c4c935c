#include "bench/kernel_timing.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "autograd/autograd.h"
#include "tensor/cuda/cuda_runtime.h"

namespace qkv::bench {

namespace {
using Clock = std::chrono::steady_clock;
int failures = 0;
}  // namespace

void sync(const Device& d) {
#ifdef QKV_HAVE_CUDA
  if (d.is_cuda()) cuda::synchronize(d.index);
#else
  (void)d;
#endif
}

std::vector<double> best_seconds(const std::vector<std::function<void()>>& fns, int reps, const Device& dev) {
  std::vector<double> best(fns.size(), 1e30);
  for (auto& f : fns) f();  // warm up: caches, allocator, thread pool
  sync(dev);
  for (int r = 0; r < reps; ++r)
    for (size_t i = 0; i < fns.size(); ++i) {
      auto t0 = Clock::now();
      fns[i]();
      sync(dev);
      best[i] = std::min(best[i], std::chrono::duration<double>(Clock::now() - t0).count());
    }
  return best;
}

int reps_for(double flops, int reps, const Device& dev) {
  const double budget = dev.is_cpu() ? 2e9 : 2e12;
  return std::max<int>(2, int(reps * std::min(1.0, budget / flops)));
}

double relative_error(const Tensor& got, const Tensor& ref) {
  const Tensor g = got.cpu().to(DType::f64).contiguous(), r = ref.cpu().to(DType::f64).contiguous();
  if (g.numel() != r.numel()) return INFINITY;
  double diff = 0, norm = 0;
  const double *pg = g.data<double>(), *pr = r.data<double>();
  for (int64_t i = 0; i < r.numel(); ++i) {
    if (!std::isfinite(pg[i])) return INFINITY;
    diff += (pg[i] - pr[i]) * (pg[i] - pr[i]);
    norm += pr[i] * pr[i];
  }
  return std::sqrt(diff / std::max(norm, 1e-300));
}

bool record_check(const std::string& what, double error, double tolerance) {
  const bool ok = error <= tolerance;  // false for NaN too
  failures += !ok;
  std::printf("%10s sampled block %s vs CPU: relative error %.2e (tolerance %.0e)%s\n", "", what.c_str(), error,
              tolerance, ok ? "" : "  FAILED");
  return ok;
}

void check_block(const std::string& what, const Tensor& got, const Tensor& ref, DType dt) {
  record_check(what, relative_error(got, ref), dt == DType::f32 ? 1e-4 : 1e-2);
}

int failed_checks() { return failures; }

}  // namespace qkv::bench
