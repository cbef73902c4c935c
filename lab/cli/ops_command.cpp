// qkvlab ops: prints the op table — every primitive op with its arity, dtypes, devices, the
// inputs it updates in place, whether it has a backward rule, its autocast policy and how its
// kernels take bf16/f16 — and the differentiable views.
#include <iomanip>
#include <iostream>

#include "autograd/op_table.h"
#include "autograd/views.h"
#include "lab/cli/commands.h"

namespace qkv::cli {
namespace {

// "2", "1+" (one or more inputs), "4k" (one or more groups of 4).
std::string arity_str(const autograd::OpInfo& r) {
  if (r.arity >= 0) return std::to_string(r.arity);
  return r.group_size() == 1 ? "1+" : std::to_string(r.group_size()) + "k";
}

// The written positions ("0,2,3"), or "-".
std::string written_str(const autograd::OpInfo& r) {
  std::string out;
  for (unsigned i = 0; i < 32; ++i)
    if ((r.writes >> i) & 1u) {
      if (!out.empty()) out += ',';
      out += std::to_string(i);
    }
  return out.empty() ? "-" : out;
}

}  // namespace

void print_op_table(std::ostream& os) {
  using autograd::op_table;
  os << std::left << std::setw(24) << "op" << std::setw(6) << "in" << std::setw(6) << "out" << std::setw(34)
     << "dtypes (input 0)" << std::setw(11) << "devices" << std::setw(10) << "in place" << std::setw(10) << "backward"
     << std::setw(10) << "autocast"
     << "bf16/f16\n";
  for (const auto& r : op_table()) {
    std::string devices = "cpu";
    if (r.cuda && cuda_compiled()) devices += ",cuda";
    os << std::setw(24) << r.name << std::setw(6) << arity_str(r) << std::setw(6) << r.outputs << std::setw(34)
       << r.dtypes.to_string(true) << std::setw(11) << devices << std::setw(10) << written_str(r) << std::setw(10)
       << (r.backward ? "yes" : "no") << std::setw(10) << autograd::amp_name(r.amp) << autograd::lowp_name(r.lowp)
       << "\n";
  }
  os << "\nin: 1+ = one or more inputs, 4k = one or more groups of 4 inputs; in place: the inputs the op updates "
        "(positions within a group)\n"
        "autocast (under train.precision bf16): low = inputs cast to bf16, fp32 = to float32, keep = as they "
        "are (mixed ones promoted), none = never cast\n"
        "bf16/f16: widen = computed in float32 around the kernel, cuda = the CUDA kernel computes on 16-bit "
        "inputs (the CPU widens), native = every kernel takes them itself\n";
  os << "\n"
     << std::setw(24) << "view"
     << "backward (views share storage: all dtypes, all devices)\n";
  for (const auto& v : autograd::view_table()) os << std::setw(24) << v.name << v.backward << "\n";
  size_t with_cuda = 0;
  for (const auto& r : op_table()) with_cuda += r.cuda != nullptr;
  os << "\n"
     << op_table().size() << " ops (" << with_cuda << " with a CUDA kernel), " << autograd::view_table().size()
     << " views; CUDA backend " << (cuda_compiled() ? "compiled" : "not compiled") << ", " << cuda_device_count()
     << " device(s) visible\n";
}

void add_ops_command(CLI::App& app) {
  auto* cmd =
      app.add_subcommand("ops",
                         "Print the op table: op, arity, dtypes, devices, in-place inputs, backward, autocast policy");
  cmd->callback([] { print_op_table(std::cout); });
}

}  // namespace qkv::cli
