// qkvlab ops: prints the op table — every primitive op with its dtypes, devices and whether it
// has a backward rule — and the differentiable views.
#include <iomanip>
#include <iostream>

#include "autograd/op_table.h"
#include "autograd/views.h"
#include "lab/cli/commands.h"

namespace qkv::cli {

void print_op_table(std::ostream& os) {
  using autograd::op_table;
  os << std::left << std::setw(24) << "op" << std::setw(6) << "in" << std::setw(6) << "out" << std::setw(34)
     << "dtypes (input 0)" << std::setw(11) << "devices" << "backward\n";
  for (const auto& r : op_table()) {
    std::string devices = "cpu";
    if (r.cuda && cuda_compiled()) devices += ",cuda";
    os << std::setw(24) << r.name << std::setw(6) << (r.arity < 0 ? std::string("1+") : std::to_string(r.arity))
       << std::setw(6) << r.outputs << std::setw(34) << r.dtypes.to_string(true) << std::setw(11) << devices
       << (r.backward ? "yes" : "no") << "\n";
  }
  os << "\n" << std::setw(24) << "view" << "backward (views share storage: all dtypes, all devices)\n";
  for (const auto& v : autograd::view_table()) os << std::setw(24) << v.name << v.backward << "\n";
  os << "\n" << op_table().size() << " ops, " << autograd::view_table().size() << " views; CUDA backend "
     << (cuda_compiled() ? "compiled" : "not compiled") << ", " << cuda_device_count() << " device(s) visible\n";
}

void add_ops_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("ops", "Print the op table: op, dtypes, devices, backward yes/no");
  cmd->callback([] { print_op_table(std::cout); });
}

}  // namespace qkv::cli
