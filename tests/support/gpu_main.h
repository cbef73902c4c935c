// The main of the test programs that compare CUDA with the CPU (op_harness, gpu_parity): doctest
// with `--require-gpu`, which makes a missing GPU exit 77 (CTest's "skipped", and the `gpu`
// label's contract), and a first line saying whether the CUDA comparisons will run.
#pragma once
#include <doctest/doctest.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "tensor/device.h"

namespace qkv::test {

// `name` opens the output lines; `what` says what is checked (printed before the cases run).
inline int gpu_test_main(int argc, char** argv, const char* name, const std::string& what) {
  std::vector<char*> args;
  bool require_gpu = false;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--require-gpu") == 0) require_gpu = true;
    else args.push_back(argv[i]);
  }
  if (require_gpu && !cuda_available()) {
    std::printf("%s: skipped (--require-gpu, and no GPU is visible)\n", name);
    return 77;
  }
  doctest::Context context;
  context.setOption("order-by", "name");
  context.applyCommandLine(int(args.size()), args.data());
  if (!context.shouldExit())
    std::printf("%s: %s; CUDA vs CPU: %s\n", name, what.c_str(),
                cuda_available() ? "on cuda:0" : "skipped (no GPU visible)");
  std::fflush(stdout);
  return context.run();
}

}  // namespace qkv::test
