#include "tensor/device.h"

#include <atomic>
#include <ostream>

#include "tensor/error.h"
#ifdef QKV_HAVE_CUDA
#include "tensor/cuda/cuda_runtime.h"
#endif

namespace qkv {

Device::Device(std::string_view s) {
  if (s == "cpu") {
    type = DeviceType::cpu;
    index = 0;
    return;
  }
  if (s.starts_with("cuda")) {
    type = DeviceType::cuda;
    index = 0;
    std::string_view rest = s.substr(4);
    if (rest.empty()) return;
    if (rest.size() >= 2 && rest[0] == ':') {
      int v = 0;
      bool ok = true;
      for (char c : rest.substr(1)) {
        if (c < '0' || c > '9' || v > 1000) {
          ok = false;
          break;
        }
        v = v * 10 + (c - '0');
      }
      if (ok) {
        index = v;
        return;
      }
    }
  }
  throw DeviceError(cat("unknown device '", s, "': expected 'cpu', 'cuda' or 'cuda:N'"));
}

std::string Device::str() const { return is_cpu() ? "cpu" : cat("cuda:", index); }
std::ostream& operator<<(std::ostream& os, const Device& d) { return os << d.str(); }

bool cuda_available() { return cuda_device_count() > 0; }

void check_device_usable(const Device& d, const char* what) {
  if (d.is_cpu()) return;
  if (!cuda_compiled())
    throw DeviceError(cat(what, ": device ", d,
                          " requested but this qkvlab build has no CUDA "
                          "backend (configure with -DQKV_CUDA=ON)"));
  int n = cuda_device_count();
  if (d.index < 0 || d.index >= n)
    throw DeviceError(cat(what, ": device ", d, " requested but ", n, " CUDA device(s) are visible"));
#ifdef QKV_HAVE_CUDA
  cuda::open_device(d.index, what);
#endif
}

namespace {
std::atomic<uint64_t> host_syncs{0};
}
uint64_t host_sync_count() { return host_syncs.load(std::memory_order_relaxed); }
void count_host_sync() { host_syncs.fetch_add(1, std::memory_order_relaxed); }

#ifndef QKV_HAVE_CUDA
bool cuda_compiled() { return false; }
int cuda_device_count() { return 0; }
std::string device_name(const Device&) { return "cpu"; }
#endif

}  // namespace qkv
