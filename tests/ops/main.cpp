// The op harness's main: runs the per-op cases in name order and says up front whether the
// CUDA comparisons will run.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include "autograd/op_table.h"

int main(int argc, char** argv) {
  doctest::Context context;
  context.setOption("order-by", "name");
  context.applyCommandLine(argc, argv);
  if (!context.shouldExit())
    std::printf("op harness: %zu ops; checks per op: forward vs reference (float64, float32), non-contiguous "
                "inputs, gradient vs central differences (float64), CUDA vs CPU: %s\n",
                qkv::autograd::op_table().size(),
                qkv::cuda_available() ? "on cuda:0" : "skipped (no GPU visible)");
  return context.run();
}
