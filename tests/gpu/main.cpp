// gpu_parity's main: whole models trained and run on cuda:0 against the same runs on the CPU
// (gpu_parity.cpp). Without a GPU each case prints the skip line of tests/support/test_support.h;
// with --require-gpu a missing GPU exits 77 (tests/support/gpu_main.h).
#define DOCTEST_CONFIG_IMPLEMENT
#include "tests/support/gpu_main.h"

int main(int argc, char** argv) {
  return qkv::test::gpu_test_main(argc, argv, "gpu parity", "whole models on cuda:0 against the CPU");
}
