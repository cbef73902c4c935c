// --device for the commands that run a model outside training (generate, cache, bench decode,
// demo): "cpu" or "cuda:N", checked before anything is built, so a missing or busy GPU is a
// clear error naming the option.
#pragma once
#include <CLI/CLI.hpp>
#include <string>

#include "tensor/device.h"

namespace qkv::cli {

inline void add_device_option(CLI::App* cmd, std::string& device) {
  cmd->add_option("--device", device, "where to run: cpu (default) or cuda:N");
}

// The device named by --device, usable by this process (a DeviceError otherwise).
inline Device usable_device(const std::string& spec, const char* command) {
  const Device d(spec);
  check_device_usable(d, (std::string(command) + " --device").c_str());
  return d;
}

}  // namespace qkv::cli
