// The running block's shared memory as the instructions that address it see it: a window of
// 32-bit shared addresses (what __cvta_generic_to_shared gives) over the block's dynamic shared
// memory, and the async proxy's view of it.
//
// Window addresses. Dynamic shared memory starts at window address kDynamicSharedBase: the CUDA
// runtime guarantees a kernel 16 bytes of alignment there and nothing more, so a kernel that
// needs its tiles at multiples of 128 or 1024 (the bulk copies, the swizzle patterns) must align
// them itself. Static __shared__ variables have no window address here.
//
// Two proxies (PTX ISA, "Memory Consistency Model: proxies"). Ordinary loads and stores are the
// generic proxy; the bulk tensor copies and wgmma are the async proxy, which sees ordinary stores
// only after a fence.proxy.async. So the window keeps a second copy of its bytes, the async view:
// a bulk copy that lands writes both, wgmma reads the async view, and fence.proxy.async copies
// the generic bytes into it. (The fence publishes every thread's stores, not only the fencing
// thread's: a fence missing in some threads while another fences is not seen.) Bytes a bulk copy
// will write are poisoned in both views when it is issued, so a reader that does not wait for
// the copy reads NaN.
#pragma once
#include <cstddef>
#include <cstdint>

namespace qkv::cuda_emu {

inline constexpr uint32_t kDynamicSharedBase = 16;

// Installs [data, data + bytes) as the calling OS thread's shared window for its lifetime, data
// at window address `base`; the async view starts as a copy of the bytes.
class SharedWindow {
 public:
  SharedWindow(void* data, size_t bytes, uint32_t base = kDynamicSharedBase);
  ~SharedWindow();
  SharedWindow(const SharedWindow&) = delete;
  SharedWindow& operator=(const SharedWindow&) = delete;
  struct State;  // cuda_emu/shared_memory.cpp

 private:
  State* previous_;
  State* state_;
};

// The window address of [p, p + bytes), or a SharedMemoryError naming `what`.
uint32_t shared_address(const void* p, size_t bytes, const char* what);
// The generic bytes at window address [address, address + bytes), checked as above.
unsigned char* shared_pointer(uint32_t address, size_t bytes, const char* what);

// fence.proxy.async.shared::cta: the generic view's bytes become the async view's.
void publish_generic_writes();
// A bulk copy landing: `bytes` bytes at window address `address`, in both views.
void async_store(uint32_t address, const void* src, size_t bytes);
// What the async proxy reads at window address `address`.
void async_load(uint32_t address, void* dst, size_t bytes);
// Bytes in flight: 0xff (NaN in every float type) in both views.
void poison_shared(uint32_t address, size_t bytes);

}  // namespace qkv::cuda_emu
