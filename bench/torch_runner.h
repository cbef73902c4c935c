// Runs a PyTorch reference script of bench/ once (torch_decode.py) and reads the JSON it prints;
// the arguments the scripts share.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "nn/sharing.h"
#include "tensor/error.h"

namespace qkv::bench {

// torch_step.py's --slots argument for a sharing pattern: the slot serving Q, K and V.
inline std::string torch_slots(nn::Sharing s) {
  const nn::SharingPattern& p = nn::sharing_pattern(s);
  return cat(" --slots ", p.slot[0], ",", p.slot[1], ",", p.slot[2]);
}

// Runs bench/<script> with Debian's /usr/bin/python3, the machine's thread count and `args`, and
// returns the JSON object it prints with "ms_per_step"; nullopt with `why` set when PyTorch is
// missing or the script fails.
std::optional<nlohmann::json> run_torch_script(const std::string& script, const std::string& args, std::string& why);

}  // namespace qkv::bench
