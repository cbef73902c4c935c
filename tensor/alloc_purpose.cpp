#include "tensor/alloc_purpose.h"

#include <utility>

namespace qkv {

namespace {
thread_local std::string current;
}

AllocationPurpose::AllocationPurpose(std::string what) : previous_(std::exchange(current, std::move(what))) {}
AllocationPurpose::~AllocationPurpose() { current = std::move(previous_); }

std::string allocation_purpose_suffix() { return current.empty() ? "" : " while " + current; }

}  // namespace qkv
