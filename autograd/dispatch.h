// call_op: the single entry point of every primitive op. It checks the inputs against the op's
// row (arity, devices, dtypes, and for an op that updates inputs in place, that those are
// contiguous and outside any graph), asks the shape rule for the outputs, allocates them on the
// inputs' device, runs that device's kernel, and records a node when a gradient is needed (or,
// for an in-place op, bumps the written inputs' storage versions instead).
#pragma once
#include <vector>

#include "autograd/op_table.h"

namespace qkv::autograd {

std::vector<Tensor> call_op(OpId id, std::vector<Tensor> inputs, Attrs attrs = NoAttrs{});

}  // namespace qkv::autograd
