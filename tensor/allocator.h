// Memory: one caching allocator per device. Freed blocks are kept in size classes and reused,
// so the training loop does not call malloc/cudaMalloc per tensor. Counters report the bytes
// tensors hold now (`current`), the most they ever held (`peak`) and what the cache keeps
// from the system (`reserved`); KV-cache and peak-memory reports read them.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "tensor/device.h"

namespace qkv {

struct MemoryStats {
  size_t current = 0;      // bytes requested by live allocations
  size_t peak = 0;         // high-water mark of `current` since the last reset_peak
  size_t reserved = 0;     // bytes obtained from the system, live or cached
  size_t allocations = 0;  // number of allocate() calls
};

inline constexpr size_t kCpuAlignment = 64;

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(size_t bytes) = 0;
  virtual void deallocate(void* ptr, size_t bytes) = 0;
  virtual MemoryStats stats() const = 0;
  virtual void reset_peak() = 0;
  virtual void empty_cache() = 0;  // returns cached, unused blocks to the system
};

// The system side of a caching allocator: raw allocation that may fail (returns nullptr).
struct RawMemory {
  void* (*alloc)(size_t bytes, int device);
  void (*free)(void* ptr, int device);
};

// exact: no size classes and no cache; every block is exactly the request, returned to the
// system when freed (a debugging mode: memory checkers then see every overrun).
class CachingAllocator final : public Allocator {
 public:
  CachingAllocator(Device device, RawMemory raw, size_t alignment, bool exact = false);
  ~CachingAllocator() override;
  void* allocate(size_t bytes) override;
  void deallocate(void* ptr, size_t bytes) override;
  MemoryStats stats() const override;
  void reset_peak() override;
  void empty_cache() override;
  // The block size a request is served from (size classes 4 per power of two, >= alignment).
  size_t block_size(size_t bytes) const;

 private:
  void release_cached_locked();
  Device device_;
  RawMemory raw_;
  size_t alignment_;
  bool exact_;
  mutable std::mutex mu_;
  std::map<size_t, std::vector<void*>> free_;  // block size -> cached blocks
  MemoryStats stats_;
};

Allocator& allocator_for(const Device& d);
// The device's caching allocator, whatever pool this thread is in (tensor/memory_pool.h): for
// memory that outlives any pool, and what the counters report.
Allocator& shared_allocator(const Device& d);
MemoryStats memory_stats(const Device& d);
void reset_peak_memory(const Device& d);
void empty_cache(const Device& d);

}  // namespace qkv
