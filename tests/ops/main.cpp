// The op harness's main: runs the per-op cases in name order and says up front whether the
// CUDA comparisons will run. With --require-gpu (the `gpu` CTest label) it exits 77, which CTest
// reports as skipped, when no GPU is visible (tests/support/gpu_main.h).
#define DOCTEST_CONFIG_IMPLEMENT
#include "autograd/op_table.h"
#include "tests/support/gpu_main.h"

int main(int argc, char** argv) {
  return qkv::test::gpu_test_main(
      argc, argv, "op harness",
      qkv::cat(qkv::autograd::op_table().size(),
               " ops; checks per op: forward vs reference (float64, float32), non-contiguous inputs, gradient vs "
               "central differences (float64); bf16/f16 forward and bf16 gradients at 16-bit points"));
}
