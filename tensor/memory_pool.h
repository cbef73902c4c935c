// A private memory pool. While a PoolScope is active on a thread, every allocation that thread
// makes on the pool's device comes from the pool (allocator_for in tensor/allocator.cpp), and
// those blocks return to the pool when they are freed, never to the device's shared cache. A
// CUDA graph (tensor/cuda/graph.h) captures its step's allocations this way: each replay writes
// the same addresses, and no tensor made outside the graph is ever handed one of them while the
// graph lives. The pool takes its blocks from the device's caching allocator (so they count as in
// use in memory_stats) and gives them back when it is destroyed; a block still held by a tensor
// then goes back when that tensor dies.
#pragma once
#include <cstddef>
#include <memory>

#include "tensor/allocator.h"
#include "tensor/device.h"

namespace qkv {

class PoolAllocator;

class MemoryPool {
 public:
  explicit MemoryPool(const Device& device);
  ~MemoryPool();
  MemoryPool(const MemoryPool&) = delete;
  MemoryPool& operator=(const MemoryPool&) = delete;

  const Device& device() const { return device_; }
  MemoryStats stats() const;  // current: bytes its live tensors hold; reserved: all its blocks

 private:
  friend class PoolScope;
  Device device_;
  PoolAllocator* allocator_;  // deletes itself once retired and empty
};

// Routes this thread's allocations on the pool's device to the pool until destroyed (scopes nest).
class PoolScope {
 public:
  explicit PoolScope(MemoryPool& pool);
  ~PoolScope();
  PoolScope(const PoolScope&) = delete;
  PoolScope& operator=(const PoolScope&) = delete;

 private:
  Allocator* previous_;
  Device previous_device_;
};

// The allocator this thread's PoolScope routes `device` to, or nullptr (allocator_for's hook).
Allocator* pool_allocator_for(const Device& device);

}  // namespace qkv
