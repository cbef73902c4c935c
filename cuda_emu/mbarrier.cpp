#include "cuda_emu/mbarrier.h"

#include <cstring>
#include <map>

#include "cuda_emu/block.h"
#include "cuda_emu/error.h"
#include "cuda_emu/shared_memory.h"

namespace qkv::cuda_emu {
namespace {

constexpr int64_t kMaxCount = (int64_t(1) << 20) - 1;  // arrival and tx-count limits

struct Barrier {
  uint32_t expected = 0;
  int64_t pending = 0;  // arrivals still missing in the current phase
  int64_t tx = 0;       // transaction bytes still expected in the current phase
  uint64_t phases = 0;  // completed phases
  bool async_visible = false;
  uint64_t stamp = 0;  // what init wrote into the barrier's 8 bytes
};

// The block's live barriers, by window address.
struct Barriers {
  std::map<uint32_t, Barrier> live;
};

uint32_t address_of(const uint64_t* bar, const char* what) {
  const uint32_t a = shared_address(bar, 8, what);
  require<SharedMemoryError>(a % 8 == 0, what, ": mbarrier at shared address ", a, " is not 8-byte aligned");
  return a;
}

uint64_t stamp_for(uint32_t address) { return 0x6d62617272696572ull ^ (uint64_t(address) * 0x9e3779b97f4a7c15ull); }

Barrier& live(uint32_t address, const char* what) {
  auto& bars = block_local<Barriers>().live;
  auto it = bars.find(address);
  require<SharedMemoryError>(it != bars.end(), what, ": the mbarrier at shared address ", address,
                             " was never initialized (mbarrier.init) or was invalidated");
  uint64_t bytes = 0;
  std::memcpy(&bytes, shared_pointer(address, 8, what), 8);
  require<SharedMemoryError>(bytes == it->second.stamp, what, ": the mbarrier at shared address ", address,
                             " was overwritten by an ordinary store since mbarrier.init");
  return it->second;
}

// The phase completes when nothing more is expected of it.
void settle(Barrier& b) {
  if (b.pending == 0 && b.tx == 0) {
    ++b.phases;
    b.pending = b.expected;
  }
}

void add_tx(Barrier& b, int64_t bytes, uint32_t address, const char* what) {
  b.tx += bytes;
  require<AsyncError>(b.tx >= -kMaxCount && b.tx <= kMaxCount, what,
                      ": the tx-count of the mbarrier at shared address ", address, " left the range +-(2^20 - 1) (",
                      b.tx, ")");
}

void arrive_once(Barrier& b, uint32_t address, const char* what) {
  require<AsyncError>(b.pending > 0, what, ": the mbarrier at shared address ", address,
                      " got more arrivals than its phase expects (", b.expected, ")");
  --b.pending;
  settle(b);
}

struct WaitFor {
  const Barrier* b;
  uint32_t parity;
};

bool phase_done(const Barrier& b, uint32_t parity) { return (b.phases & 1u) != (parity & 1u); }

}  // namespace

void mbarrier_init(uint64_t* bar, uint32_t count) {
  const char* what = "mbarrier.init";
  const uint32_t a = address_of(bar, what);
  require<AsyncError>(count >= 1 && count <= kMaxCount, what, ": arrival count ", count, " at shared address ", a,
                      " (expected 1 to 2^20 - 1)");
  Barrier b;
  b.expected = count;
  b.pending = count;
  b.stamp = stamp_for(a);
  std::memcpy(shared_pointer(a, 8, what), &b.stamp, 8);
  block_local<Barriers>().live[a] = b;
}

void mbarrier_inval(uint64_t* bar) {
  const uint32_t a = address_of(bar, "mbarrier.inval");
  live(a, "mbarrier.inval");
  block_local<Barriers>().live.erase(a);
}

uint64_t mbarrier_arrive(uint64_t* bar) {
  const char* what = "mbarrier.arrive";
  const uint32_t a = address_of(bar, what);
  Barrier& b = live(a, what);
  const uint64_t token = b.phases;
  arrive_once(b, a, what);
  return token;
}

uint64_t mbarrier_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  const char* what = "mbarrier.arrive.expect_tx";
  const uint32_t a = address_of(bar, what);
  Barrier& b = live(a, what);
  const uint64_t token = b.phases;
  add_tx(b, bytes, a, what);
  arrive_once(b, a, what);
  return token;
}

void mbarrier_expect_tx(uint64_t* bar, uint32_t bytes) {
  const char* what = "mbarrier.expect_tx";
  const uint32_t a = address_of(bar, what);
  add_tx(live(a, what), bytes, a, what);
}

bool mbarrier_test_wait_parity(uint64_t* bar, uint32_t parity) {
  const char* what = "mbarrier.test_wait.parity";
  return phase_done(live(address_of(bar, what), what), parity);
}

bool mbarrier_try_wait_parity(uint64_t* bar, uint32_t parity) {
  const char* what = "mbarrier.try_wait.parity";
  const WaitFor w{&live(address_of(bar, what), what), parity};
  wait_until(
      what,
      [](const void* c) {
        const auto* w = static_cast<const WaitFor*>(c);
        return phase_done(*w->b, w->parity);
      },
      &w);
  return true;
}

void fence_mbarrier_init() {
  for (auto& [address, b] : block_local<Barriers>().live) b.async_visible = true;
}

void mbarrier_complete_tx(uint32_t address, uint32_t bytes) {
  const char* what = "a bulk copy's complete_tx";
  Barrier& b = live(address, what);
  require_async_barrier(address, what);
  add_tx(b, -int64_t(bytes), address, what);
  settle(b);
}

void require_async_barrier(uint32_t address, const char* what) {
  const Barrier& b = live(address, what);
  require<AsyncError>(b.async_visible, what, ": the mbarrier at shared address ", address,
                      " was initialized, but no fence.mbarrier_init or fence.proxy.async made that visible to the "
                      "async proxy");
}

}  // namespace qkv::cuda_emu
