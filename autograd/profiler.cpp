#include "autograd/profiler.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string_view>
#include <vector>

#ifdef QKV_HAVE_CUDA
#include "tensor/cuda/cuda_runtime.h"
#endif

namespace qkv::autograd {
namespace {

struct Entry {
  int64_t calls = 0;
  double seconds = 0;
};

// A CUDA kernel's start and stop events, read when the profile is (kernels run asynchronously).
struct PendingCuda {
  const char* op;
  void* start;
  void* stop;
};

struct Profile {
  std::mutex mu;
  std::map<std::string, Entry> entries;
  std::vector<PendingCuda> pending;
};

constexpr size_t kMaxPending = 4096;  // resolved in batches, so events do not pile up

Profile& profile() {
  static auto* p = new Profile();  // outlives static destruction; reported by the atexit hook
  return *p;
}

bool enabled_from_env() {
  const char* v = std::getenv("QKV_PROFILE");
  const bool on = v && *v && std::string(v) != "0";
  if (on) std::atexit([] { std::fputs(profile_report().c_str(), stderr); });
  return on;
}

// A profile row's name: "matmul (cpu)".
std::string entry_key(std::string_view op, std::string_view device) {
  return std::string(op) + " (" + std::string(device) + ")";
}

std::atomic<bool>& enabled() {
  static std::atomic<bool> on{enabled_from_env()};
  return on;
}

}  // namespace

bool profiling_enabled() { return enabled().load(std::memory_order_relaxed); }
void set_profiling_enabled(bool on) { enabled().store(on, std::memory_order_relaxed); }

namespace {
void add_locked(Profile& p, const char* op, const char* device, double seconds) {
  Entry& e = p.entries[entry_key(op, device)];
  ++e.calls;
  e.seconds += seconds;
}

// Reads the device time of every pending CUDA kernel (waits for the last one to finish).
void resolve_pending_locked(Profile& p) {
#ifdef QKV_HAVE_CUDA
  for (const PendingCuda& k : p.pending) {
    add_locked(p, k.op, "cuda", cuda::elapsed_ms(k.start, k.stop) * 1e-3);
    cuda::destroy_event(k.start);
    cuda::destroy_event(k.stop);
  }
#endif
  p.pending.clear();
}
}  // namespace

void record_kernel_time(const char* op, const char* device, double seconds) {
  Profile& p = profile();
  std::lock_guard lock(p.mu);
  add_locked(p, op, device, seconds);
}

void record_cuda_kernel(const char* op, void* start_event, void* stop_event) {
  Profile& p = profile();
  std::lock_guard lock(p.mu);
  p.pending.push_back({op, start_event, stop_event});
  if (p.pending.size() >= kMaxPending) resolve_pending_locked(p);
}

std::string profile_report() {
  Profile& p = profile();
  std::lock_guard lock(p.mu);
  resolve_pending_locked(p);
  std::vector<std::pair<std::string, Entry>> rows(p.entries.begin(), p.entries.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
  double total = 0;
  for (const auto& [name, e] : rows) total += e.seconds;
  std::string out = "qkvlab op profile (kernel time)\n";
  char line[160];
  std::snprintf(line, sizeof line, "%-34s %10s %12s %7s\n", "op", "calls", "total ms", "share");
  out += line;
  for (const auto& [name, e] : rows) {
    std::snprintf(line, sizeof line, "%-34s %10lld %12.2f %6.1f%%\n", name.c_str(), (long long)e.calls, e.seconds * 1e3,
                  total > 0 ? 100 * e.seconds / total : 0.0);
    out += line;
  }
  std::snprintf(line, sizeof line, "%-34s %10s %12.2f\n", "total", "", total * 1e3);
  return out + line;
}

int64_t profiled_calls(const std::string& op, const std::string& device) {
  Profile& p = profile();
  std::lock_guard lock(p.mu);
  resolve_pending_locked(p);
  auto it = p.entries.find(entry_key(op, device));
  return it == p.entries.end() ? 0 : it->second.calls;
}

void reset_profile() {
  Profile& p = profile();
  std::lock_guard lock(p.mu);
  resolve_pending_locked(p);
  p.entries.clear();
}

}  // namespace qkv::autograd
