// An emulated warp for running CUDA device code on the CPU: the 32 lanes of one warp as fibers
// (ucontext) on the calling thread, switched cooperatively. A lane runs until it finishes or
// reaches a warp collective (ldmatrix, mma, a shuffle), where it waits; once all 32 wait at the
// same collective, its model runs once over every lane's operands and the lanes go on. A lane
// that finishes while others wait, or lanes that wait at different collectives, are a
// WarpDivergence naming the lanes and the collectives: on a GPU that is undefined behaviour.
#pragma once
#include <functional>

#include "tensor/error.h"

namespace qkv::cuda_emu {

inline constexpr int kLanes = 32;

// Lanes of one warp that did not meet at a warp collective.
struct WarpDivergence : Error {
  using Error::Error;
};

// Runs body(lane) for lanes 0..31 to completion, as one warp. An exception thrown by a lane or by
// a collective's model ends the run and is rethrown here.
void run_warp(const std::function<void(int lane)>& body);

// The calling lane, inside run_warp.
int lane_id();

// A warp collective, called by every lane with its own operands in `slot`: waits until all 32
// lanes arrive with the same `op`, then `model(slots, context)` runs once with slots[lane] the
// slot of each lane (it reads their operands and writes their results), and every lane returns.
using WarpModel = void (*)(void* const* slots, const void* context);
void converge(const char* op, void* slot, WarpModel model, const void* context = nullptr);

}  // namespace qkv::cuda_emu
