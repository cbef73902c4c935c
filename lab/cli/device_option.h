// --device for the commands that run a model outside training (generate, analyze, cache, bench
// decode, demo): read by tensor/device.h's one parser of device names and checked usable by this
// process while the options are parsed, so a bad name, a missing or a busy GPU is a clear error
// naming the option before anything is built.
#pragma once
#include <CLI/CLI.hpp>
#include <string>

#include "tensor/device.h"
#include "tensor/error.h"

namespace qkv::cli {

inline void add_device_option(CLI::App* cmd, Device& device, const std::string& command) {
  const std::string option = command + " --device";
  cmd->add_option_function<std::string>(
      "--device",
      [&device, option](const std::string& spec) {
        try {
          device = Device(spec);
        } catch (const DeviceError&) {
          throw ValueError(cat(option, ": '", spec, "' is not a device: expected cpu, cuda or cuda:N"));
        }
        check_device_usable(device, option.c_str());
      },
      "where to run: cpu (default), cuda or cuda:N");
}

}  // namespace qkv::cli
