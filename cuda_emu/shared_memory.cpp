#include "cuda_emu/shared_memory.h"

#include <cstring>
#include <vector>

#include "cuda_emu/error.h"

namespace qkv::cuda_emu {

struct SharedWindow::State {
  unsigned char* data;
  size_t bytes;
  uint32_t base;
  std::vector<unsigned char> async_view;
};

namespace {

using State = SharedWindow::State;
thread_local State* window = nullptr;

State& current(const char* what) {
  require<SharedMemoryError>(window != nullptr && window->bytes > 0, what,
                             ": the block has no dynamic shared memory (the emulator gives window addresses to "
                             "dynamic shared memory only)");
  return *window;
}

// The offset into the window's bytes of [address, address + bytes).
size_t checked_offset(const State& w, uint32_t address, size_t bytes, const char* what) {
  require<SharedMemoryError>(address >= w.base && uint64_t(address) + bytes <= w.base + w.bytes, what,
                             ": shared address ", address, " (", bytes, " bytes) is outside the block's ", w.bytes,
                             " bytes of dynamic shared memory at ", w.base, "..", w.base + w.bytes);
  return address - w.base;
}

}  // namespace

SharedWindow::SharedWindow(void* data, size_t bytes, uint32_t base)
    : previous_(window),
      state_(new State{static_cast<unsigned char*>(data), bytes, base,
                       std::vector<unsigned char>(static_cast<unsigned char*>(data),
                                                  static_cast<unsigned char*>(data) + bytes)}) {
  window = state_;
}

SharedWindow::~SharedWindow() {
  window = previous_;
  delete state_;
}

uint32_t shared_address(const void* p, size_t bytes, const char* what) {
  require<SharedMemoryError>(window != nullptr, what, ": no shared memory is installed (outside a kernel)");
  const auto* c = static_cast<const unsigned char*>(p);
  require<SharedMemoryError>(c >= window->data && c + bytes <= window->data + window->bytes, what, ": address ", p,
                             " (", bytes, " bytes) is not in the block's dynamic shared memory");
  return window->base + uint32_t(c - window->data);
}

unsigned char* shared_pointer(uint32_t address, size_t bytes, const char* what) {
  State& w = current(what);
  return w.data + checked_offset(w, address, bytes, what);
}

void publish_generic_writes() {
  if (window == nullptr || window->bytes == 0) return;
  std::memcpy(window->async_view.data(), window->data, window->bytes);
}

void async_store(uint32_t address, const void* src, size_t bytes) {
  State& w = current("a bulk copy");
  const size_t o = checked_offset(w, address, bytes, "a bulk copy");
  std::memcpy(w.data + o, src, bytes);
  std::memcpy(w.async_view.data() + o, src, bytes);
}

void async_load(uint32_t address, void* dst, size_t bytes) {
  State& w = current("an async-proxy read");
  std::memcpy(dst, w.async_view.data() + checked_offset(w, address, bytes, "an async-proxy read"), bytes);
}

void poison_shared(uint32_t address, size_t bytes) {
  State& w = current("a bulk copy");
  const size_t o = checked_offset(w, address, bytes, "a bulk copy");
  std::memset(w.data + o, 0xff, bytes);
  std::memset(w.async_view.data() + o, 0xff, bytes);
}

}  // namespace qkv::cuda_emu
