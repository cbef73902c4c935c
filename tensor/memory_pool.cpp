#include "tensor/memory_pool.h"

#include <map>
#include <mutex>
#include <vector>

#include "tensor/error.h"

namespace qkv {

// The pool's blocks, by size, taken from the device's allocator. Retired (its MemoryPool
// destroyed): cached blocks go back at once, live ones as they are freed, and the last one
// deletes the allocator (a Storage keeps a pointer to the allocator that served it).
class PoolAllocator final : public Allocator {
 public:
  explicit PoolAllocator(Allocator& parent) : parent_(parent) {}

  void* allocate(size_t bytes) override {
    const size_t size = rounded(bytes);
    std::lock_guard lock(mu_);
    void* p = nullptr;
    if (auto it = free_.find(size); it != free_.end() && !it->second.empty()) {
      p = it->second.back();
      it->second.pop_back();
    } else {
      p = parent_.allocate(size);
      stats_.reserved += size;
    }
    stats_.current += bytes;
    stats_.peak = std::max(stats_.peak, stats_.current);
    ++stats_.allocations;
    ++live_;
    return p;
  }

  void deallocate(void* ptr, size_t bytes) override {
    if (!ptr) return;
    bool last = false;
    {
      std::lock_guard lock(mu_);
      stats_.current -= bytes;
      --live_;
      if (retired_) {
        parent_.deallocate(ptr, rounded(bytes));
        stats_.reserved -= rounded(bytes);
        last = live_ == 0;
      } else {
        free_[rounded(bytes)].push_back(ptr);
      }
    }
    if (last) delete this;
  }

  MemoryStats stats() const override {
    std::lock_guard lock(mu_);
    return stats_;
  }
  void reset_peak() override {
    std::lock_guard lock(mu_);
    stats_.peak = stats_.current;
  }
  void empty_cache() override {}  // the pool keeps its blocks: replays need the same addresses

  // The MemoryPool is gone: every cached block back to the device's allocator.
  void retire() {
    bool last = false;
    {
      std::lock_guard lock(mu_);
      retired_ = true;
      for (auto& [size, blocks] : free_) {
        for (void* p : blocks) parent_.deallocate(p, size);
        stats_.reserved -= size * blocks.size();
      }
      free_.clear();
      last = live_ == 0;
    }
    if (last) delete this;
  }

 private:
  static size_t rounded(size_t bytes) { return (std::max<size_t>(bytes, 1) + 511) / 512 * 512; }

  Allocator& parent_;
  mutable std::mutex mu_;
  std::map<size_t, std::vector<void*>> free_;
  MemoryStats stats_;
  int64_t live_ = 0;
  bool retired_ = false;
};

namespace {
thread_local Allocator* t_pool = nullptr;
thread_local Device t_pool_device = kCPU;
}  // namespace

// The pool draws from the device's shared allocator, not from a pool this thread may be in.
MemoryPool::MemoryPool(const Device& device) : device_(device) {
  Allocator* const active = t_pool;
  t_pool = nullptr;
  allocator_ = new PoolAllocator(allocator_for(device));
  t_pool = active;
}

MemoryPool::~MemoryPool() { allocator_->retire(); }

MemoryStats MemoryPool::stats() const { return allocator_->stats(); }

PoolScope::PoolScope(MemoryPool& pool) : previous_(t_pool), previous_device_(t_pool_device) {
  t_pool = pool.allocator_;
  t_pool_device = pool.device_;
}

PoolScope::~PoolScope() {
  t_pool = previous_;
  t_pool_device = previous_device_;
}

Allocator* pool_allocator_for(const Device& device) { return t_pool && t_pool_device == device ? t_pool : nullptr; }

}  // namespace qkv
