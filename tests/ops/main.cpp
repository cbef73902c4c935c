// The op harness's main: runs the per-op cases in name order and says up front whether the
// CUDA comparisons will run. With --require-gpu (the `gpu` CTest label) it exits 77, which CTest
// reports as skipped, when no GPU is visible.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "autograd/op_table.h"

int main(int argc, char** argv) {
  std::vector<char*> args;
  bool require_gpu = false;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--require-gpu") == 0) require_gpu = true;
    else args.push_back(argv[i]);
  }
  if (require_gpu && !qkv::cuda_available()) {
    std::printf("op harness: skipped (--require-gpu, and no GPU is visible)\n");
    return 77;
  }
  doctest::Context context;
  context.setOption("order-by", "name");
  context.applyCommandLine(int(args.size()), args.data());
  if (!context.shouldExit())
    std::printf(
        "op harness: %zu ops; checks per op: forward vs reference (float64, float32), non-contiguous "
        "inputs, gradient vs central differences (float64), CUDA vs CPU: %s\n",
        qkv::autograd::op_table().size(), qkv::cuda_available() ? "on cuda:0" : "skipped (no GPU visible)");
  return context.run();
}
