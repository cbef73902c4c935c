#include "autograd/dispatch.h"

#include <chrono>

#include "autograd/autocast.h"
#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "autograd/preflight.h"
#include "autograd/profiler.h"
#include "kernels/cpu/library_gemm.h"
#include "kernels/layout.h"
#include "tensor/view.h"
#ifdef QKV_HAVE_CUDA
#include "tensor/cuda/cuda_runtime.h"
#endif

namespace qkv::autograd {
namespace {

// The node a table op leaves in the graph.
struct OpNode final : Node {
  const OpInfo* op;
  Attrs attrs;
  std::vector<SavedTensor> saved_inputs, saved_outputs;

  OpNode(const OpInfo& info, Attrs a) : op(&info), attrs(std::move(a)) {}
  std::string name() const override { return op->name; }
  void release_saved() override {
    for (auto& s : saved_inputs) s.reset();
    for (auto& s : saved_outputs) s.reset();
  }

  std::vector<Tensor> apply(std::vector<Tensor>&& grads, const PendingGrads& pending) override {
    if (!op->backward)
      throw AutogradError(cat("backward reached op '", op->name,
                              "', which is not differentiable "
                              "(detach its inputs, or compute it under NoGradGuard)"));
    std::vector<Tensor> in(saved_inputs.size()), out(saved_outputs.size());
    for (size_t i = 0; i < in.size(); ++i) in[i] = saved_inputs[i].unpack(op->name);
    for (size_t i = 0; i < out.size(); ++i) out[i] = saved_outputs[i].unpack(op->name);
    if (in.empty()) in.resize(inputs.size());
    if (out.empty()) out.resize(outputs.size());
    std::unique_ptr<bool[]> arrived(new bool[grads.size()]);
    for (size_t i = 0; i < grads.size(); ++i) arrived[i] = grads[i].defined();
    // The first output counts as zero if no gradient reached it; the others stay undefined
    // (BackwardArgs::grads).
    if (!arrived[0] && is_floating(outputs[0].dtype))
      grads[0] = zeros(outputs[0].shape, {outputs[0].dtype, outputs[0].device});
    std::unique_ptr<bool[]> needs(new bool[next.size()]);
    for (size_t i = 0; i < next.size(); ++i) needs[i] = next[i].node != nullptr;
    const std::span<const bool> needs_grad(needs.get(), next.size()), grad_arrived(arrived.get(), grads.size());
    BackwardArgs args{op->name, in, out, inputs, grads, attrs, needs_grad, grad_arrived, &pending};
    return op->backward(args);
  }
};

void check_inputs(const OpInfo& info, const std::vector<Tensor>& in) {
  const char* op = info.name;
  if (info.arity >= 0)
    check<ValueError>(int(in.size()) == info.arity, op, ": expected ", info.arity, " inputs, got ", in.size());
  else if (info.group_size() == 1) check<ValueError>(!in.empty(), op, ": expected at least one input");
  else
    check<ValueError>(!in.empty() && in.size() % size_t(info.group_size()) == 0, op,
                      ": expected one or more groups of ", info.group_size(), " inputs, got ", in.size(), " inputs");
  for (size_t i = 0; i < in.size(); ++i)
    check<ValueError>(in[i].defined() || info.is_optional(i), op, ": input ", i, " is undefined");
}

// Arithmetic and comparisons read a 0-dim CPU operand on the host and pass its value to the
// CUDA kernel as an argument (kernels/cuda/elementwise.cu).
bool takes_host_scalars(OpId id) {
  switch (id) {
    case OpId::add:
    case OpId::sub:
    case OpId::mul:
    case OpId::div:
    case OpId::gt:
    case OpId::eq: return true;
    default: return false;
  }
}

// All defined inputs on one device; a 0-dim CPU tensor may join a CUDA op (as a kernel argument,
// or moved over), unless the op writes it.
Device common_device(const OpInfo& info, std::vector<Tensor>& in, const Attrs& attrs) {
  if (in.empty()) return attr<RandomAttrs>(attrs, info.name).device;
  const Tensor* first = nullptr;
  for (const Tensor& t : in)
    if (t.defined() && !(t.dim() == 0 && t.device().is_cpu())) {
      first = &t;
      break;
    }
  if (!first) return kCPU;
  const Device dev = first->device();
  for (size_t i = 0; i < in.size(); ++i) {
    Tensor& t = in[i];
    if (!t.defined() || t.device() == dev) continue;
    if (t.dim() == 0 && t.device().is_cpu() && !info.is_written(i)) {
      if (!takes_host_scalars(info.id)) t = raw::to(t, t.dtype(), dev);
      continue;
    }
    if (info.is_written(i))
      throw DeviceError(cat(info.name, ": input ", i, " ", describe(t), " is on ", t.device(),
                            " but is updated in "
                            "place by an op on ",
                            dev, " (move it there first)"));
    throw DeviceError(cat(info.name, ": expected all inputs on one device, got ", describe(*first), " on ",
                          first->device(), " and input ", i, " ", describe(t), " on ", t.device()));
  }
  return dev;
}

// The inputs an op updates in place must be writable where they are: contiguous (kernels write
// them as flat arrays), and, while grad mode is on, not part of a graph (the write would not
// be recorded, so gradients through them would be silently wrong).
void check_written(const OpInfo& info, const std::vector<Tensor>& in) {
  for (size_t i = 0; i < in.size(); ++i) {
    const Tensor& t = in[i];
    if (!info.is_written(i) || !t.defined()) continue;
    check<ValueError>(t.is_contiguous(), info.name, ": input ", i, " (", describe(t),
                      ") must be contiguous: it is updated in place");
    if (grad_enabled() && t.requires_grad())
      throw AutogradError(cat(info.name, ": input ", i, " (", describe(t), ") is ",
                              t.is_leaf() ? "a leaf tensor" : "a tensor",
                              " that requires grad and is being used in an "
                              "in-place operation; run it under NoGradGuard (as optimizer steps do)"));
  }
}

// Runs the kernel, timed when profiling (CUDA: events around the launch, device time). Under
// QKV_CUDA_SYNC=1 a CUDA op is waited for and checked at once, so a failure names its op.
void run_kernel(const OpInfo& info, kernels::Kernel kernel, const Device& device, std::vector<Tensor>& in,
                std::vector<Tensor>& out, const Attrs& attrs) {
  const kernels::KernelArgs args{in, out, attrs};
  if (!profiling_enabled()) {
    kernel(args);
  } else if (device.is_cuda()) {
#ifdef QKV_HAVE_CUDA
    void* start = cuda::record_event(device.index);
    kernel(args);
    record_cuda_kernel(info.name, start, cuda::record_event(device.index));
#endif
  } else {
    const auto begin = std::chrono::steady_clock::now();
    kernel(args);
    record_kernel_time(info.name, "cpu",
                       std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count());
  }
#ifdef QKV_HAVE_CUDA
  if (device.is_cuda() && cuda::sync_after_each_op()) cuda::synchronize(device.index, info.name);
#endif
}

// Whether the kernel for `device` computes this call in float32 around itself (the row's `lowp`
// column): some input or output is bf16/f16 and the kernel does not take them.
bool widens(const OpInfo& info, const Device& device, const std::vector<Tensor>& in, const std::vector<Tensor>& out) {
  if (info.lowp == kLowNative || (info.lowp != kLowWiden && device.is_cuda())) return false;
  bool low = false, only_bf16 = true;
  auto see = [&](const Tensor& t) {
    if (!t.defined() || !kLowFloat.contains(t.dtype())) return;
    low = true;
    only_bf16 &= t.dtype() == DType::bf16;
  };
  for (const Tensor& t : in) see(t);
  for (const Tensor& t : out) see(t);
  return low && !(info.lowp == kLowGemm && only_bf16 && kernels::cpu::library_bf16_gemm_enabled());
}

// Runs the kernel on float32 copies of the bf16/f16 inputs into float32 outputs, then rounds
// those to the outputs' dtypes. Inputs that are one tensor (K=V) are widened once, so a kernel
// that reads them once still sees one tensor.
void run_widened(const OpInfo& info, kernels::Kernel kernel, const Device& device, std::vector<Tensor>& in,
                 std::vector<Tensor>& out, const Attrs& attrs) {
  std::vector<Tensor> wide_in(in.size()), wide_out(out.size());
  for (size_t i = 0; i < in.size(); ++i) {
    const Tensor& t = in[i];
    if (!t.defined() || !kLowFloat.contains(t.dtype())) {
      wide_in[i] = t;
      continue;
    }
    for (size_t j = 0; j < i && !wide_in[i].defined(); ++j)
      if (in[j].defined() && kernels::same_view(in[j], t)) wide_in[i] = wide_in[j];
    if (!wide_in[i].defined()) wide_in[i] = raw::to(t, DType::f32, t.device());  // a 0-dim CPU scalar stays one
  }
  for (size_t i = 0; i < out.size(); ++i)
    wide_out[i] = kLowFloat.contains(out[i].dtype()) ? empty(out[i].shape(), {DType::f32, device}) : out[i];
  run_kernel(info, kernel, device, wide_in, wide_out, attrs);
  for (size_t i = 0; i < out.size(); ++i)
    if (kLowFloat.contains(out[i].dtype())) raw::copy(out[i], wide_out[i]);
}

// An output as its spec lays it out: row-major, or row-major over `order` and permuted back.
Tensor allocate(const OutputSpec& s, const Device& device) {
  if (s.order.empty()) return empty(s.shape, {s.dtype, device});
  Shape stored(s.order.size());
  std::vector<int64_t> back(s.order.size());
  for (size_t i = 0; i < s.order.size(); ++i) {
    stored[i] = s.shape[size_t(s.order[i])];
    back[size_t(s.order[i])] = int64_t(i);
  }
  return raw::permute(empty(stored, {s.dtype, device}), back);
}

}  // namespace

std::vector<Tensor> call_op(OpId id, std::vector<Tensor> in, Attrs attrs) {
  const OpInfo& info = op_info(id);
  check_inputs(info, in);
  if (autocast_dtype()) autocast_inputs(info, in);
  const Device device = common_device(info, in, attrs);
  const DType primary = in.empty() ? attr<RandomAttrs>(attrs, info.name).dtype : in[0].dtype();
  check<DTypeError>(info.dtypes.contains(primary), info.name, ": dtype ", dtype_name(primary),
                    " is not supported (supported: ", info.dtypes.to_string(), ")");
  check_device_usable(device, info.name);
  if (info.writes) check_written(info, in);

  const std::vector<OutputSpec> specs = info.shape(in, attrs, info.name);
  std::vector<Tensor> out;
  out.reserve(specs.size());
  for (const OutputSpec& s : specs) out.push_back(allocate(s, device));

  const kernels::Kernel kernel = device.is_cpu() ? info.cpu : info.cuda;
  if (tracing_ops()) note_op_call(info.id, device, in, attrs);  // a preflight: shapes and devices only
  else if (!kernel) throw DeviceError(cat(info.name, ": no kernel on ", device, " (`qkvlab ops` shows the table)"));
  else if (widens(info, device, in, out)) run_widened(info, kernel, device, in, out, attrs);
  else run_kernel(info, kernel, device, in, out, attrs);

  if (info.writes) {
    // Saved tensors remember their storage version: bumping it makes a backward through a
    // graph that saved a written tensor refuse instead of using the new values.
    for (size_t i = 0; i < in.size(); ++i)
      if (info.is_written(i) && in[i].defined()) in[i].storage()->bump_version();
    return out;  // no graph: in-place ops have no backward
  }
  if (!any_requires_grad(in)) return out;
  auto node = std::make_shared<OpNode>(info, std::move(attrs));
  for (const Tensor& t : in) {
    node->inputs.push_back(TensorMeta::of(t));
    node->next.push_back(t.defined() && t.requires_grad() && is_floating(t.dtype()) ? gradient_edge(t) : Edge{});
  }
  for (const Tensor& t : out) node->outputs.push_back(TensorMeta::of(t));
  if (info.save & kSaveInputs)
    for (size_t i = 0; i < in.size(); ++i) node->saved_inputs.emplace_back(info.saves_input(i) ? in[i] : Tensor());
  if (info.save & kSaveOutputs)
    for (const Tensor& t : out) node->saved_outputs.emplace_back(t);
  for (size_t i = 0; i < out.size(); ++i)
    if (is_floating(out[i].dtype())) set_history(out[i], node, int(i));
  return out;
}

}  // namespace qkv::autograd
