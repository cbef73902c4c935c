#include "autograd/preflight.h"

#include <algorithm>

namespace qkv::autograd {
namespace {

thread_local std::vector<OpCall>* active = nullptr;  // the trace being recorded

}  // namespace

bool tracing_ops() { return active != nullptr; }

void note_op_call(OpId op, const Device& device) {
  if (!active) return;
  const OpCall c{op, device};
  if (std::find(active->begin(), active->end(), c) == active->end()) active->push_back(c);
}

std::vector<OpCall> trace_ops(const std::function<void()>& work) {
  check<ValueError>(active == nullptr, "trace_ops: already tracing on this thread");
  std::vector<OpCall> calls;
  active = &calls;
  try {
    work();
  } catch (...) {
    active = nullptr;
    throw;
  }
  active = nullptr;
  return calls;
}

std::vector<std::string> ops_without_kernel(const std::vector<OpId>& ops, const Device& device) {
  std::vector<std::string> missing;
  for (const OpInfo& info : op_table()) {
    if (std::find(ops.begin(), ops.end(), info.id) == ops.end()) continue;
    if (!(device.is_cpu() ? info.cpu : info.cuda)) missing.push_back(info.name);
  }
  return missing;
}

void require_kernels(const std::vector<OpCall>& calls, const std::vector<OpId>& also, const Device& device,
                     const std::string& what) {
  std::vector<OpId> ops = also;
  for (const OpCall& c : calls) ops.push_back(c.op);
  const std::vector<std::string> missing = ops_without_kernel(ops, device);
  if (missing.empty()) return;
  std::string list;
  for (const std::string& m : missing) list += (list.empty() ? "" : ", ") + m;
  throw DeviceError(cat(what, ": the model needs ", missing.size(), " op(s) with no kernel on ", device, ": ", list,
                        " (`qkvlab ops` shows the table; train on the CPU, or add the kernels as "
                        "docs/ADDING_AN_OP.md describes)"));
}

}  // namespace qkv::autograd
