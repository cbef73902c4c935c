#include "tensor/allocator.h"

#include <algorithm>
#include <cstdlib>
#include <memory>
#ifdef __linux__
#include <sys/mman.h>
#endif

#include "tensor/error.h"
#include "tensor/memory_pool.h"
#ifdef QKV_HAVE_CUDA
#include "tensor/cuda/cuda_runtime.h"
#endif

namespace qkv {

CachingAllocator::CachingAllocator(Device device, RawMemory raw, size_t alignment, bool exact)
    : device_(device), raw_(raw), alignment_(alignment), exact_(exact) {}

CachingAllocator::~CachingAllocator() {
  std::lock_guard lock(mu_);
  release_cached_locked();
}

size_t CachingAllocator::block_size(size_t bytes) const {
  if (exact_) return std::max<size_t>(bytes, 1);
  size_t b = std::max(bytes, alignment_);
  b = (b + alignment_ - 1) / alignment_ * alignment_;
  if (b <= 4 * alignment_) return b;
  // Round up to 1, 1.25, 1.5 or 1.75 times a power of two: at most 25% slack per block.
  size_t top = size_t(1) << (63 - __builtin_clzll(b));
  size_t step = top / 4;
  return (b + step - 1) / step * step;
}

void* CachingAllocator::allocate(size_t bytes) {
  size_t size = block_size(bytes);
  std::lock_guard lock(mu_);
  void* p = nullptr;
  if (auto it = free_.find(size); it != free_.end() && !it->second.empty()) {
    p = it->second.back();
    it->second.pop_back();
  } else {
    p = raw_.alloc(size, device_.index);
    if (!p) {  // give the cache back to the system and try once more
      release_cached_locked();
      p = raw_.alloc(size, device_.index);
    }
    if (!p)
      throw OutOfMemory(cat("out of memory on ", device_, ": failed to allocate ", bytes, " bytes (", stats_.current,
                            " bytes in use, ", stats_.reserved, " reserved)"));
    stats_.reserved += size;
  }
  stats_.current += bytes;
  stats_.peak = std::max(stats_.peak, stats_.current);
  ++stats_.allocations;
  return p;
}

void CachingAllocator::deallocate(void* ptr, size_t bytes) {
  if (!ptr) return;
  std::lock_guard lock(mu_);
  stats_.current -= bytes;
  if (exact_) {
    raw_.free(ptr, device_.index);
    stats_.reserved -= block_size(bytes);
    return;
  }
  free_[block_size(bytes)].push_back(ptr);
}

void CachingAllocator::release_cached_locked() {
  for (auto& [size, blocks] : free_) {
    for (void* p : blocks) raw_.free(p, device_.index);
    stats_.reserved -= size * blocks.size();
  }
  free_.clear();
}

MemoryStats CachingAllocator::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}
void CachingAllocator::reset_peak() {
  std::lock_guard lock(mu_);
  stats_.peak = stats_.current;
}
void CachingAllocator::empty_cache() {
  std::lock_guard lock(mu_);
  release_cached_locked();
}

namespace {
// Blocks of this size or more start on a 2 MiB boundary and ask the kernel for transparent huge
// pages over their whole 2 MiB pages: weights, KV caches and optimizer state are streamed every
// step, and with 4 KiB pages every 4 KiB of such a stream costs a TLB miss.
constexpr size_t kHugePage = size_t(2) << 20, kHugeFrom = 2 * kHugePage;
void* cpu_alloc(size_t bytes, int) {
  if (bytes < kHugeFrom) return std::aligned_alloc(kCpuAlignment, bytes);
  void* p = std::aligned_alloc(kHugePage, (bytes + kHugePage - 1) / kHugePage * kHugePage);
#ifdef MADV_HUGEPAGE
  if (p) madvise(p, bytes / kHugePage * kHugePage, MADV_HUGEPAGE);  // advice only: failure changes nothing
#endif
  return p;
}
void cpu_free(void* p, int) { std::free(p); }
}  // namespace

// Defined in tensor/cuda/cuda_allocator.cpp when the CUDA backend is built.
Allocator& cuda_allocator(int device);

Allocator& shared_allocator(const Device& d) {
  if (d.is_cpu()) {
    // Never destroyed: tensors with static storage duration may free into it at exit.
    static auto* cpu = new CachingAllocator(kCPU, RawMemory{cpu_alloc, cpu_free}, kCpuAlignment);
    return *cpu;
  }
  check_device_usable(d, "allocator");
  return cuda_allocator(d.index);
}

Allocator& allocator_for(const Device& d) {
  if (Allocator* pool = pool_allocator_for(d)) return *pool;  // a PoolScope is active (memory_pool.h)
  return shared_allocator(d);
}

MemoryStats memory_stats(const Device& d) { return shared_allocator(d).stats(); }
void reset_peak_memory(const Device& d) { shared_allocator(d).reset_peak(); }
void empty_cache(const Device& d) {
  shared_allocator(d).empty_cache();
#ifdef QKV_HAVE_CUDA
  if (d.is_cuda()) cuda::release_pinned_staging();
#endif
}

#ifndef QKV_HAVE_CUDA
Allocator& cuda_allocator(int) { throw DeviceError("this qkvlab build has no CUDA backend"); }
#endif

}  // namespace qkv
