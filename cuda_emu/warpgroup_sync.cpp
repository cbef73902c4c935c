#include "cuda_emu/warpgroup_sync.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "cuda_emu/block.h"
#include "cuda_emu/error.h"

namespace qkv::cuda_emu {
namespace {

constexpr int kNamedBarriers = 16;
constexpr int kRegisterFile = 65536;

struct Named {
  int expected = 0, arrived = 0;
  uint64_t generation = 0;
};

struct NamedBarriers {
  std::array<Named, kNamedBarriers> bars;
};

// Arrives at barrier `id`; returns the generation the arrival belongs to.
uint64_t arrive(int id, int threads, const char* what) {
  require<EmulatorError>(id >= 1 && id < kNamedBarriers, what, ": barrier ", id,
                         " (expected 1 to 15; 0 is __syncthreads')");
  require<EmulatorError>(threads > 0 && threads % kLanes == 0 && threads <= block_threads(), what, ": ", threads,
                         " threads (expected a multiple of 32 up to the block's ", block_threads(), ")");
  Named& b = block_local<NamedBarriers>().bars[size_t(id)];
  if (b.arrived == 0) b.expected = threads;
  require<Divergence>(b.expected == threads, what, ": barrier ", id, " expects ", b.expected, " threads, but thread ",
                      thread_index(), " arrives expecting ", threads);
  const uint64_t generation = b.generation;
  if (++b.arrived == b.expected) {
    b.arrived = 0;
    ++b.generation;
  }
  return generation;
}

struct Waiting {
  const Named* bar;
  uint64_t generation;
};

struct Registers {
  bool started = false;
  int free = 0;
  std::vector<int> per_thread;  // per warpgroup
};

Registers& registers() {
  Registers& r = block_local<Registers>();
  if (!r.started) {
    r.started = true;
    const int threads = block_threads();
    const int initial = std::min(255 / 8 * 8, kRegisterFile / threads / 8 * 8);
    r.per_thread.assign(size_t((threads + kWarpgroupThreads - 1) / kWarpgroupThreads), initial);
    r.free = kRegisterFile - initial * threads;
  }
  return r;
}

struct Request {
  bool increase;
  int registers;
};

void setmaxnreg_model(void* const* slots, int warpgroup, const void*) {
  const auto* req = static_cast<const Request*>(slots[0]);
  Registers& r = registers();
  int& now = r.per_thread[size_t(warpgroup)];
  const int delta = (req->registers - now) * kWarpgroupThreads;
  require<EmulatorError>(req->increase ? delta >= 0 : delta <= 0, "setmaxnreg.", req->increase ? "inc" : "dec",
                         ": warpgroup ", warpgroup, " has ", now, " registers per thread and asks for ",
                         req->registers);
  require<EmulatorError>(delta <= r.free, "setmaxnreg.inc: warpgroup ", warpgroup, " asks for ", req->registers,
                         " registers per thread, but only ", r.free,
                         " of the block's registers are free (the other warpgroups hold the rest)");
  r.free -= delta;
  now = req->registers;
}

}  // namespace

void named_barrier_sync(int id, int threads) {
  const uint64_t generation = arrive(id, threads, "bar.sync");
  const Waiting w{&block_local<NamedBarriers>().bars[size_t(id)], generation};
  wait_until(
      "bar.sync",
      [](const void* c) {
        const auto* w = static_cast<const Waiting*>(c);
        return w->bar->generation != w->generation;
      },
      &w);
}

void named_barrier_arrive(int id, int threads) { arrive(id, threads, "bar.arrive"); }

void setmaxnreg(bool increase, int count) {
  const char* what = increase ? "setmaxnreg.inc" : "setmaxnreg.dec";
  require<EmulatorError>(count >= 24 && count <= 256 && count % 8 == 0, what, ": ", count,
                         " registers (expected 24 to 256, a multiple of 8)");
  const Request req{increase, count};
  if (increase) {
    const int g = thread_index() / kWarpgroupThreads;
    const std::pair<int, int> want{g, count};
    wait_until(
        what,
        [](const void* c) {
          const auto* w = static_cast<const std::pair<int, int>*>(c);
          Registers& r = registers();
          return (w->second - r.per_thread[size_t(w->first)]) * kWarpgroupThreads <= r.free;
        },
        &want);
  }
  warpgroup_converge(what, const_cast<Request*>(&req), setmaxnreg_model);
}

}  // namespace qkv::cuda_emu
