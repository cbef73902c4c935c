// An emulated thread block for running CUDA device code on the CPU: every thread of the block a
// fiber (its own stack) on the calling OS thread, switched cooperatively. A thread runs until it
// finishes or reaches a point where it must meet others or wait:
//   - a warp collective (ldmatrix, mma, a shuffle, a vote) goes ahead once every lane in its mask
//     waits at it (same op, same mask); its model then runs once over those lanes' operands;
//   - a warpgroup collective (the wgmma instructions, setmaxnreg) once all 128 threads of the
//     warpgroup (threads 128 g .. 128 g + 127) wait at it;
//   - the barrier (__syncthreads) opens once every thread of the block waits at it;
//   - a wait (an mbarrier's phase, a named barrier) ends once its condition holds.
// Anything else is a Divergence naming the threads and where each stopped: a thread that exits
// while others wait at the barrier, lanes of one mask at different collectives, a lane of the
// mask that exited, a block in which no thread can go on (on a GPU each is undefined behaviour
// or a hang). Between two meeting points the warps run one at a time, each as far as it can go,
// in the schedule's order (first to last, last to first, or a seeded shuffle), and so do the
// lanes of a warp between its collectives: a result that changes with the schedule reads memory
// another thread writes without a barrier between them.
//
// Asynchronous work (a bulk copy, a wgmma) is posted to the block and completes at a point the
// schedule chooses: under `forward` as late as possible (when no thread could otherwise go on) and
// the newest first, under `reverse` at the first scheduling point after it was issued, under
// `shuffled` at seeded random points in between, in any order. So a product issued without
// waiting for its tile's copy reads before the copy lands (forward), and a copy into a stage
// released before the product reading it completed lands first (forward, shuffled). A thread that reads what
// the work writes without waiting for it therefore sees what was there before (poisoned by the
// instruction's model) under one schedule and the result under another.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>

#include "cuda_emu/error.h"

namespace qkv::cuda_emu {

inline constexpr int kLanes = 32;
inline constexpr int kWarpgroupThreads = 128;
inline constexpr uint32_t kFullMask = 0xffffffffu;

enum class Schedule { forward, reverse, shuffled };

// Runs body(thread) for threads 0 .. threads-1 of one block to completion. An exception thrown
// by a thread or by a collective's model ends the run and is rethrown here.
void run_block(int threads, const std::function<void(int thread)>& body, Schedule schedule = Schedule::forward,
               uint64_t seed = 0);
// run_block of one warp.
inline void run_warp(const std::function<void(int lane)>& body) { run_block(kLanes, body); }

// The calling thread's index in its block, inside run_block; the block's thread count; whether
// thread t has exited.
int thread_index();
int block_threads();
bool thread_exited(int t);
inline int lane_id() { return thread_index() % kLanes; }

// __syncthreads.
void sync_threads();

// A warp collective, called by every lane of `mask` with its own operands in `slot`: waits until
// all of them arrive at `op` with the same mask, then `model(slots, mask, context)` runs once,
// slots[lane] the slot of each lane in the mask (null for the others), and they all return.
using WarpModel = void (*)(void* const* slots, uint32_t mask, const void* context);
void warp_converge(const char* op, uint32_t mask, void* slot, WarpModel model, const void* context = nullptr);

// A warpgroup collective, called by all 128 threads of the caller's warpgroup: once all arrive
// at `op`, model(slots, warpgroup, context) runs once with slots[t] thread 128 warpgroup + t's.
using WarpgroupModel = void (*)(void* const* slots, int warpgroup, const void* context);
void warpgroup_converge(const char* op, void* slot, WarpgroupModel model, const void* context = nullptr);

// Suspends the calling thread until ready(context) holds (checked at once, then whenever the
// scheduler looks for work); `what` names the wait in a Divergence ("mbarrier.try_wait.parity").
using WaitCondition = bool (*)(const void* context);
void wait_until(const char* what, WaitCondition ready, const void* context);

// Work that completes asynchronously: complete() runs once, on the block's OS thread between two
// threads' turns, at a point the schedule chooses (see above) or when wait_for forces it.
struct AsyncWork {
  virtual ~AsyncWork() = default;
  virtual void complete() = 0;
  // Named in the error when the block ends with the work still pending.
  virtual const char* name() const = 0;
};
// Posts work to the running block; returns its ticket.
uint64_t post_async(std::unique_ptr<AsyncWork> work);
// Completes the posted work with this ticket now, if it is still pending.
void complete_now(uint64_t ticket);
// Whether the work with this ticket is still pending.
bool pending(uint64_t ticket);

// A check run when every thread of the running block has exited, before the block ends: it
// throws what a model found left undone (a wgmma issued but never committed).
void on_block_end(std::function<void()> check);

// The running block's schedule, and a coin flip from its seeded generator (the `shuffled`
// schedule's choices).
Schedule current_schedule();
bool coin_flip();

// State the models keep per running block (an mbarrier table, wgmma groups in flight): one T per
// block, made on first use and destroyed when the block ends.
template <class T> T& block_local();

namespace detail {
void* block_local_slot(int id, void* (*make)(), void (*destroy)(void*));
int next_block_local_id();
}  // namespace detail

template <class T> T& block_local() {
  static const int id = detail::next_block_local_id();
  return *static_cast<T*>(detail::block_local_slot(
      id, [] { return static_cast<void*>(new T()); }, [](void* p) { delete static_cast<T*>(p); }));
}

}  // namespace qkv::cuda_emu
