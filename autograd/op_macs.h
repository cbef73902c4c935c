// Multiply-accumulates counted from the op calls a piece of work makes (preflight.h's shape
// trace, no kernel launched): the matrix products — matmul, linear, attention (Q K^T and P V),
// cache_attention — as the study's FLOPs table counts them; elementwise ops, reductions, norms
// and softmax count 0, and so does conv2d (its output size needs the call's strides). A check on
// the closed forms (nn/models/gpt.h's gpt_macs) that follows the model's real forward.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "autograd/preflight.h"

namespace qkv::autograd {

// One call's multiply-accumulates.
int64_t op_macs(const OpShapes& call);

// `work`'s multiply-accumulates by op name (only ops that count), and their total.
struct MacCount {
  std::map<std::string, int64_t> by_op;
  int64_t total() const;
};
MacCount count_macs(const std::function<void()>& work);

}  // namespace qkv::autograd
