// Preflight: runs a piece of work (a training step's forward and backward) with every op's
// inputs, shapes and devices checked and its outputs allocated, but no kernel launched, and
// lists the ops it called. Before a model trains on a device, the trainers run one preflight of
// their first step and refuse, naming every op-table row the model needs that has no kernel on
// that device, instead of failing at the first such op minutes in. Outputs hold garbage; random
// ops draw nothing (generators are left as they were); gradients the work accumulates must be
// dropped by the caller.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "autograd/op_table.h"

namespace qkv::autograd {

struct OpCall {
  OpId op;
  Device device;
  friend bool operator==(const OpCall&, const OpCall&) = default;
};

// The distinct (op, device) pairs `work` calls, in first-call order.
std::vector<OpCall> trace_ops(const std::function<void()>& work);

// One call of traced work: the op, the shapes of its inputs (an undefined input's is empty) and
// its attributes.
struct OpShapes {
  OpId op;
  std::vector<Shape> inputs;
  Attrs attrs;
};
// Every call `work` makes, in call order, launching nothing (as trace_ops): what op_macs.h
// counts a model's multiply-accumulates from.
std::vector<OpShapes> trace_op_shapes(const std::function<void()>& work);

// Whether call_op is inside a trace on this thread (it then launches nothing), and how call_op
// records a call there.
bool tracing_ops();
void note_op_call(OpId op, const Device& device, const std::vector<Tensor>& inputs, const Attrs& attrs);
// The rows among `ops` with no kernel on `device`, or among `calls` with none on the device
// each was called on (by name, table order, each once).
std::vector<std::string> ops_without_kernel(const std::vector<OpId>& ops, const Device& device);
std::vector<std::string> ops_without_kernel(const std::vector<OpCall>& calls);
// Throws DeviceError naming `what` (e.g. "train.device cuda:0") and every op of `calls` with no
// kernel on the device it was called on, plus those of `also` (the optimizer's own ops) with
// none on `device`.
void require_kernels(const std::vector<OpCall>& calls, const std::vector<OpId>& also, const Device& device,
                     const std::string& what);

}  // namespace qkv::autograd
