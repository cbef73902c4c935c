// A block of device memory shared by a tensor and its views. It returns its bytes to the
// device's caching allocator when the last view goes away. `version` counts in-place writes so
// autograd can refuse to use a saved tensor that was modified after it was saved.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "tensor/allocator.h"
#include "tensor/device.h"

namespace qkv {

class Storage {
 public:
  Storage(size_t nbytes, Device device);  // allocates through allocator_for(device)
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  ~Storage();

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  const Device& device() const { return device_; }
  uint64_t version() const { return version_.load(std::memory_order_relaxed); }
  void bump_version() { version_.fetch_add(1, std::memory_order_relaxed); }

 private:
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
  Allocator* allocator_ = nullptr;
  std::atomic<uint64_t> version_{0};
};

}  // namespace qkv
