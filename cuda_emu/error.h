// The emulated device's errors (cuda_emu/ sees nothing of qkvlab above it). Each is what a GPU
// would do wrong without saying so, said with the thread, the instruction and the launch:
//   Divergence         threads of a block that did not meet where they had to (a barrier, a warp
//                      or warpgroup collective), or a block in which no thread can go on;
//   SharedMemoryError  an address an instruction that reads or writes shared memory may not use
//                      (outside the block's shared memory, misaligned, not a live mbarrier);
//   AsyncError         misuse of the asynchronous instructions (wgmma without its fence, a
//                      warpgroup leaving with products in flight, a transaction count that went
//                      negative, a copy to a barrier the async proxy cannot see yet);
//   KernelFault        a launch whose result depends on the order of its threads or blocks, or a
//                      fault inside a kernel, named with the launch site.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace qkv::cuda_emu {

struct EmulatorError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct Divergence : EmulatorError {
  using EmulatorError::EmulatorError;
};
struct SharedMemoryError : EmulatorError {
  using EmulatorError::EmulatorError;
};
struct AsyncError : EmulatorError {
  using EmulatorError::EmulatorError;
};
struct KernelFault : EmulatorError {
  using EmulatorError::EmulatorError;
};

// str("a=", 1) -> "a=1", with operator<<.
template <class... Args> std::string str(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}

// Throws E with the concatenated message when cond fails.
template <class E, class... Args> void require(bool cond, Args&&... args) {
  if (!cond) throw E(str(std::forward<Args>(args)...));
}

}  // namespace qkv::cuda_emu
