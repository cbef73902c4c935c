#include "cuda_emu/device_memory.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define QKV_EMU_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define QKV_EMU_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define QKV_EMU_POISON(p, n) ((void)(p), (void)(n))
#define QKV_EMU_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace qkv::cuda_emu {
namespace {

constexpr size_t kArenaBytes = size_t(64) << 30;  // address space reserved for device memory

size_t page_bytes() {
  static const size_t n = size_t(sysconf(_SC_PAGESIZE));
  return n;
}
size_t round_to_pages(size_t bytes) { return (bytes + page_bytes() - 1) / page_bytes() * page_bytes(); }

struct Arena {
  std::mutex mu;
  unsigned char* base = nullptr;
  size_t used = 0;                            // bytes below the highest allocation's end
  std::map<size_t, size_t> free_extents;      // offset -> bytes, coalesced
  std::map<const void*, size_t> allocations;  // start -> requested bytes
  std::map<const void*, size_t> mapped_host;
  int access = 0;  // live DeviceAccess objects
  struct sigaction previous {};
};

Arena& arena() {
  static Arena* a = new Arena();  // never destroyed: memory may be freed during exit
  return *a;
}

void set_protection(Arena& a, bool accessible) {
  if (a.used > 0) mprotect(a.base, a.used, accessible ? PROT_READ | PROT_WRITE : PROT_NONE);
}

// A fault inside the arena is the host touching device memory: say so, then let the previous
// handler (AddressSanitizer's stack trace, or the default core dump) have it.
void on_segv(int sig, siginfo_t* info, void* context) {
  Arena& a = arena();
  const auto* p = static_cast<const unsigned char*>(info->si_addr);
  if (a.base != nullptr && p >= a.base && p < a.base + kArenaBytes) {
    char line[200];
    const int n = std::snprintf(line, sizeof line,
                                "qkvlab emulated device: the host read or wrote device memory at %p (memory from "
                                "cudaMalloc is not host memory on a GPU: copy it with cudaMemcpy)\n",
                                info->si_addr);
    if (n > 0) (void)!write(2, line, size_t(n));
  }
  if (a.previous.sa_flags & SA_SIGINFO) {
    a.previous.sa_sigaction(sig, info, context);
    return;
  }
  if (a.previous.sa_handler != SIG_DFL && a.previous.sa_handler != SIG_IGN) {
    a.previous.sa_handler(sig);
    return;
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

void install_report(Arena& a) {
  struct sigaction now {};
  sigaction(SIGSEGV, nullptr, &now);
  if ((now.sa_flags & SA_SIGINFO) && now.sa_sigaction == on_segv) return;
  struct sigaction sa {};
  sa.sa_sigaction = on_segv;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, &a.previous);
}

// Reserves the arena and installs the fault report, once.
bool reserve(Arena& a) {
  if (a.base != nullptr) return true;
  void* p = mmap(nullptr, kArenaBytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return false;
  a.base = static_cast<unsigned char*>(p);
  install_report(a);
  return true;
}

// First fit among the free extents, else the end of the used range.
size_t take_extent(Arena& a, size_t bytes) {
  for (auto it = a.free_extents.begin(); it != a.free_extents.end(); ++it) {
    if (it->second < bytes) continue;
    const size_t offset = it->first, left = it->second - bytes;
    a.free_extents.erase(it);
    if (left > 0) a.free_extents[offset + bytes] = left;
    return offset;
  }
  if (a.used + bytes > kArenaBytes) return SIZE_MAX;
  const size_t offset = a.used;
  a.used += bytes;
  return offset;
}

void give_back(Arena& a, size_t offset, size_t bytes) {
  auto next = a.free_extents.lower_bound(offset);
  if (next != a.free_extents.end() && next->first == offset + bytes) {
    bytes += next->second;
    next = a.free_extents.erase(next);
  }
  if (next != a.free_extents.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      prev->second += bytes;
      return;
    }
  }
  a.free_extents[offset] = bytes;
}

template <class F> void each_region(Arena& a, F f) {
  for (auto& [p, n] : a.allocations) f(p, n);
  for (auto& [p, n] : a.mapped_host) f(p, n);
}

}  // namespace

DeviceAccess::DeviceAccess() {
  Arena& a = arena();
  std::lock_guard<std::mutex> lock(a.mu);
  if (a.access++ == 0) set_protection(a, true);
}

DeviceAccess::~DeviceAccess() {
  Arena& a = arena();
  std::lock_guard<std::mutex> lock(a.mu);
  if (--a.access == 0) {
    set_protection(a, false);
    if (a.base != nullptr) install_report(a);
  }
}

void install_host_access_report() {
  Arena& a = arena();
  std::lock_guard<std::mutex> lock(a.mu);
  install_report(a);
}

void* device_allocate(size_t bytes) {
  Arena& a = arena();
  std::lock_guard<std::mutex> lock(a.mu);
  if (!reserve(a)) return nullptr;
  const size_t span = round_to_pages(bytes);
  const size_t offset = take_extent(a, span);
  if (offset == SIZE_MAX) return nullptr;
  unsigned char* p = a.base + offset;
  // New pages take the arena's current protection; their contents are whatever the last
  // allocation left (cudaMalloc does not clear memory either).
  mprotect(p, span, a.access > 0 ? PROT_READ | PROT_WRITE : PROT_NONE);
  QKV_EMU_UNPOISON(p, bytes);
  QKV_EMU_POISON(p + bytes, span - bytes);
  a.allocations[p] = bytes;
  return p;
}

bool device_free(void* ptr) {
  Arena& a = arena();
  std::lock_guard<std::mutex> lock(a.mu);
  auto it = a.allocations.find(ptr);
  if (it == a.allocations.end()) return false;
  auto* p = static_cast<unsigned char*>(ptr);
  const size_t span = round_to_pages(it->second);
  a.allocations.erase(it);
  QKV_EMU_POISON(p, span);
  madvise(p, span, MADV_DONTNEED);  // the pages' memory goes back to the system
  give_back(a, size_t(p - a.base), span);
  return true;
}

bool is_device_memory(const void* p, size_t bytes) {
  Arena& a = arena();
  std::lock_guard<std::mutex> lock(a.mu);
  auto it = a.allocations.upper_bound(p);
  if (it == a.allocations.begin()) return false;
  --it;
  const auto* start = static_cast<const unsigned char*>(it->first);
  const auto* q = static_cast<const unsigned char*>(p);
  return q >= start && q + bytes <= start + it->second;
}

void register_mapped_host(const void* p, size_t bytes) {
  Arena& a = arena();
  std::lock_guard<std::mutex> lock(a.mu);
  a.mapped_host[p] = bytes;
}

void unregister_mapped_host(const void* p) {
  Arena& a = arena();
  std::lock_guard<std::mutex> lock(a.mu);
  a.mapped_host.erase(p);
}

MemorySnapshot snapshot_memory() {
  const DeviceAccess access;
  Arena& a = arena();
  std::lock_guard<std::mutex> lock(a.mu);
  MemorySnapshot snap;
  each_region(a, [&](const void* p, size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    snap.regions.push_back({p, std::vector<unsigned char>(b, b + n)});
  });
  return snap;
}

void restore_memory(const MemorySnapshot& snap) {
  const DeviceAccess access;
  for (const auto& r : snap.regions) std::memcpy(const_cast<void*>(r.data), r.bytes.data(), r.bytes.size());
}

std::string first_difference(const MemorySnapshot& snap) {
  const DeviceAccess access;
  for (const auto& r : snap.regions) {
    const auto* now = static_cast<const unsigned char*>(r.data);
    if (std::memcmp(now, r.bytes.data(), r.bytes.size()) == 0) continue;
    for (size_t i = 0; i < r.bytes.size(); ++i)
      if (now[i] != r.bytes[i])
        return std::to_string(i) + " of a " + std::to_string(r.bytes.size()) + "-byte allocation";
  }
  return {};
}

}  // namespace qkv::cuda_emu
