// An emulated thread block for running CUDA device code on the CPU: every thread of the block a
// fiber (its own stack) on the calling OS thread, switched cooperatively. A thread runs until it
// finishes or reaches a barrier (__syncthreads) or a warp collective (ldmatrix, mma, a shuffle,
// a vote), where it waits:
//   - a warp collective goes ahead once every lane in its mask waits at it (same op, same
//     mask); its model then runs once over those lanes' operands;
//   - the barrier opens once every thread of the block waits at it.
// Anything else is a Divergence naming the threads and where each stopped: a thread that exits
// while others wait at the barrier, lanes of one mask at different collectives, a lane of the
// mask that exited (on a GPU each is undefined behaviour or a hang). Between two barriers the
// warps run one at a time, each as far as the barrier, in the schedule's order (first to last,
// last to first, or a seeded shuffle), and so do the lanes of a warp between its collectives: a
// result that changes with the schedule reads memory another thread writes without a barrier
// between them.
#pragma once
#include <cstdint>
#include <functional>

#include "tensor/error.h"

namespace qkv::cuda_emu {

inline constexpr int kLanes = 32;
inline constexpr uint32_t kFullMask = 0xffffffffu;

// Threads of a block that did not meet where they had to.
struct Divergence : Error {
  using Error::Error;
};

enum class Schedule { forward, reverse, shuffled };

// Runs body(thread) for threads 0 .. threads-1 of one block to completion. An exception thrown
// by a thread or by a collective's model ends the run and is rethrown here.
void run_block(int threads, const std::function<void(int thread)>& body, Schedule schedule = Schedule::forward,
               uint64_t seed = 0);
// run_block of one warp.
inline void run_warp(const std::function<void(int lane)>& body) { run_block(kLanes, body); }

// The calling thread's index in its block, inside run_block.
int thread_index();
inline int lane_id() { return thread_index() % kLanes; }

// __syncthreads.
void sync_threads();

// A warp collective, called by every lane of `mask` with its own operands in `slot`: waits until
// all of them arrive at `op` with the same mask, then `model(slots, mask, context)` runs once,
// slots[lane] the slot of each lane in the mask (null for the others), and they all return.
using WarpModel = void (*)(void* const* slots, uint32_t mask, const void* context);
void warp_converge(const char* op, uint32_t mask, void* slot, WarpModel model, const void* context = nullptr);

}  // namespace qkv::cuda_emu
