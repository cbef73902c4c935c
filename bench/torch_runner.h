// Runs bench/torch_step.py (the same model in PyTorch, built by tests/parity/torch_models.py)
// and returns its median milliseconds per training step, or a note on why it could not run.
#pragma once
#include <string>

namespace qkv::bench {

struct TorchTiming {
  double ms = -1;     // negative: not measured
  std::string note;   // "PyTorch 1.13.0, 2 threads", or why it did not run
};

// `args`: torch_step.py's arguments after the script name, e.g. "vit --d-model 64 ...".
TorchTiming time_torch_step(const std::string& args);

}  // namespace qkv::bench
