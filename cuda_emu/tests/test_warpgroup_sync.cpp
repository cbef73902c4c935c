// Named barriers and setmaxnreg on the emulated device (cuda_emu/warpgroup_sync.h): a barrier
// shared by two warpgroups orders a handoff under every schedule, the register file holds a
// warp-specialized block's budget (one producer warpgroup down to 24, two consumers up to 240
// of 384 threads' 168) and refuses one that does not fit, and an increase waits for the decrease
// that makes room.
#include <doctest/doctest.h>

#include <vector>

#include "cuda_emu/error.h"

namespace {

namespace emu = qkv::cuda_emu;
using emu::KernelFault;

// Warpgroup 0 writes, arrives at barrier 1; warpgroup 1 syncs there, then reads.
__global__ void handoff(int* out) {
  CUDA_EMU_SHARED(int, value, [128]);
  const int t = int(threadIdx.x);
  if (t < 128) {
    value[t] = 3 * t;
    emu::named_barrier_arrive(1, 256);
  } else {
    emu::named_barrier_sync(1, 256);
    out[t - 128] = value[t - 128];
  }
}

__global__ void mismatched(int*) { emu::named_barrier_sync(2, threadIdx.x < 32 ? 64 : 96); }

// The producer warpgroup gives registers back after the consumers ask for theirs.
template <int kConsumer> __global__ void registers(int* out) {
  const int g = int(threadIdx.x) / 128;
  if (g == 0) {
    emu::named_barrier_sync(3, 128);  // let the consumers ask first
    emu::setmaxnreg(false, 24);
  } else {
    emu::setmaxnreg(true, kConsumer);
  }
  out[threadIdx.x] = g;
}

int* device_ints(size_t n) {
  void* p = nullptr;
  REQUIRE(cudaMalloc(&p, n * sizeof(int)) == cudaSuccess);
  return static_cast<int*>(p);
}

}  // namespace

TEST_CASE("emulated named barriers: a handoff between warpgroups is ordered under every schedule") {
  int* out = device_ints(128);
  CUDA_EMU_LAUNCH(1, 256, 0, nullptr, handoff)(out);
  std::vector<int> got(128);
  REQUIRE(cudaMemcpy(got.data(), out, got.size() * sizeof(int), cudaMemcpyDeviceToHost) == cudaSuccess);
  for (int t = 0; t < 128; ++t) CHECK(got[size_t(t)] == 3 * t);
  CHECK_THROWS_WITH_AS(CUDA_EMU_LAUNCH(1, 128, 0, nullptr, mismatched)(out),
                       doctest::Contains("barrier 2 expects 64 threads, but thread 32 arrives expecting 96"),
                       KernelFault);
  cudaFree(out);
}

TEST_CASE("emulated setmaxnreg: 24 + 2 x 240 fits 384 threads' register file, 2 x 256 does not") {
  int* out = device_ints(384);
  CHECK_NOTHROW(CUDA_EMU_LAUNCH(1, 384, 0, nullptr, registers<240>)(out));
  CHECK_THROWS_WITH_AS(CUDA_EMU_LAUNCH(1, 384, 0, nullptr, registers<256>)(out),
                       doctest::Contains("of the block's registers are free"), KernelFault);
  cudaFree(out);
}
