// Runs bench/torch_step.py (the same model in PyTorch, built by tests/parity/torch_models.py)
// and returns its median milliseconds per training step, or a note on why it could not run.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "nn/sharing.h"
#include "tensor/error.h"

namespace qkv::bench {

struct TorchTiming {
  double ms = -1;    // negative: not measured
  std::string note;  // "PyTorch 1.13.0, 2 threads", or why it did not run
};

// torch_step.py's --slots argument for a sharing pattern: the slot serving Q, K and V.
inline std::string torch_slots(nn::Sharing s) {
  const nn::SharingPattern& p = nn::sharing_pattern(s);
  return cat(" --slots ", p.slot[0], ",", p.slot[1], ",", p.slot[2]);
}

// `args`: torch_step.py's arguments after the script name, e.g. "vit --d-model 64 ...".
TorchTiming time_torch_step(const std::string& args);

// Runs bench/<script> with Debian's /usr/bin/python3, the machine's thread count and `args`, and
// returns the JSON object it prints with "ms_per_step"; nullopt with `why` set when PyTorch is
// missing or the script fails.
std::optional<nlohmann::json> run_torch_script(const std::string& script, const std::string& args, std::string& why);

}  // namespace qkv::bench
