// What the allocations of a scope are for, so that running out of memory names it: "out of memory
// on cpu: failed to allocate 8589934592 bytes for a float32 tensor of shape [65536, 32768] while
// running reverse/QKV/seed0". Scopes nest; the innermost names.
#pragma once
#include <string>

namespace qkv {

class AllocationPurpose {
 public:
  explicit AllocationPurpose(std::string what);
  ~AllocationPurpose();
  AllocationPurpose(const AllocationPurpose&) = delete;
  AllocationPurpose& operator=(const AllocationPurpose&) = delete;

 private:
  std::string previous_;
};

// " while <what>" for the innermost purpose on this thread, or "" outside any.
std::string allocation_purpose_suffix();

}  // namespace qkv
