#include "autograd/preflight.h"

#include <algorithm>

namespace qkv::autograd {
namespace {

thread_local std::vector<OpCall>* active = nullptr;           // the trace being recorded
thread_local std::vector<OpShapes>* active_shapes = nullptr;  // the shape trace being recorded

// Runs `work` with `slot` pointing at `record`, cleared again however it ends.
template <class T> void traced(T*& slot, T& record, const std::function<void()>& work) {
  check<ValueError>(active == nullptr && active_shapes == nullptr, "trace_ops: already tracing on this thread");
  slot = &record;
  try {
    work();
  } catch (...) {
    slot = nullptr;
    throw;
  }
  slot = nullptr;
}

}  // namespace

bool tracing_ops() { return active != nullptr || active_shapes != nullptr; }

void note_op_call(OpId op, const Device& device, const std::vector<Tensor>& inputs, const Attrs& attrs) {
  if (active_shapes) {
    OpShapes call{op, {}, attrs};
    for (const Tensor& t : inputs) call.inputs.push_back(t.defined() ? t.shape() : Shape{});
    active_shapes->push_back(std::move(call));
  }
  if (!active) return;
  const OpCall c{op, device};
  if (std::find(active->begin(), active->end(), c) == active->end()) active->push_back(c);
}

std::vector<OpCall> trace_ops(const std::function<void()>& work) {
  std::vector<OpCall> calls;
  traced(active, calls, work);
  return calls;
}

std::vector<OpShapes> trace_op_shapes(const std::function<void()>& work) {
  std::vector<OpShapes> calls;
  traced(active_shapes, calls, work);
  return calls;
}

namespace {
bool has_kernel(const OpInfo& info, const Device& device) { return device.is_cpu() ? info.cpu : info.cuda; }
}  // namespace

std::vector<std::string> ops_without_kernel(const std::vector<OpId>& ops, const Device& device) {
  std::vector<OpCall> calls;
  for (OpId op : ops) calls.push_back({op, device});
  return ops_without_kernel(calls);
}

std::vector<std::string> ops_without_kernel(const std::vector<OpCall>& calls) {
  std::vector<std::string> missing;
  for (const OpInfo& info : op_table())
    for (const OpCall& c : calls)
      if (c.op == info.id && !has_kernel(info, c.device)) {
        missing.push_back(info.name);
        break;
      }
  return missing;
}

void require_kernels(const std::vector<OpCall>& calls, const std::vector<OpId>& also, const Device& device,
                     const std::string& what) {
  std::vector<OpCall> all = calls;
  for (OpId op : also) all.push_back({op, device});
  const std::vector<std::string> missing = ops_without_kernel(all);
  if (missing.empty()) return;
  std::string list;
  for (const std::string& m : missing) list += (list.empty() ? "" : ", ") + m;
  throw DeviceError(cat(what, ": the model needs ", missing.size(), " op(s) with no kernel on ", device, ": ", list,
                        " (`qkvlab ops` shows the table; train on the CPU, or add the kernels as "
                        "docs/ADDING_AN_OP.md describes)"));
}

}  // namespace qkv::autograd
