// The mbarrier model against the PTX ISA's text (cuda_emu/mbarrier.h): phases, parity waits
// (on a fresh barrier parity 1 is complete, parity 0 not), arrivals and the tx-count, a
// two-stage producer/consumer pipeline that comes out the same under every schedule, and the
// misuses the model names.
#include <doctest/doctest.h>

#include <vector>

#include "cuda_emu/error.h"

namespace {

namespace emu = qkv::cuda_emu;
using emu::KernelFault;

// Dynamic shared memory aligned to 16 bytes by the runtime: a barrier at its start is 8-aligned.
__global__ void phases(int* out) {
  CUDA_EMU_DYNAMIC_SHARED(uint64_t, bar);
  const int t = int(threadIdx.x);
  if (t == 0) {
    emu::mbarrier_init(bar, 64);
    out[0] = emu::mbarrier_test_wait_parity(bar, 1);  // the phase before the first: complete
    out[1] = emu::mbarrier_test_wait_parity(bar, 0);  // the first: not yet
  }
  __syncthreads();
  emu::mbarrier_arrive(bar);
  emu::mbarrier_try_wait_parity(bar, 0);  // returns once all 64 arrived
  __syncthreads();
  if (t == 0) {
    out[2] = emu::mbarrier_test_wait_parity(bar, 0);
    out[3] = emu::mbarrier_test_wait_parity(bar, 1);  // the second phase has begun: not complete
    emu::mbarrier_expect_tx(bar, 128);                // bytes are expected of the second phase
  }
  __syncthreads();
  emu::mbarrier_arrive(bar);
  __syncthreads();
  if (t == 0) out[4] = emu::mbarrier_test_wait_parity(bar, 1);  // all arrived, 128 bytes still due
}

// Warp 0 produces 6 values through two slots, warp 1 consumes them: full[s] says a slot holds a
// value, empty[s] that it was read. Each side tracks the parity of its phase per slot.
__global__ void pipeline(int* out) {
  CUDA_EMU_DYNAMIC_SHARED(unsigned char, smem);
  auto* full = reinterpret_cast<uint64_t*>(smem);
  uint64_t* empty = full + 2;
  auto* slot = reinterpret_cast<int*>(full + 4);
  const int t = int(threadIdx.x), lane = t % 32;
  if (t == 0)
    for (int s = 0; s < 2; ++s) {
      emu::mbarrier_init(&full[s], 1);
      emu::mbarrier_init(&empty[s], 32);
    }
  __syncthreads();
  for (int i = 0; i < 6; ++i) {
    const int s = i % 2;
    const uint32_t parity = uint32_t(i / 2 % 2);
    if (t < 32) {
      emu::mbarrier_try_wait_parity(&empty[s], parity ^ 1u);  // a fresh slot counts as read
      if (lane == 0) {
        slot[s] = 100 * (i + 1);
        emu::mbarrier_arrive(&full[s]);
      }
    } else {
      emu::mbarrier_try_wait_parity(&full[s], parity);
      if (lane == 0) out[i] = slot[s];
      emu::mbarrier_arrive(&empty[s]);
    }
  }
}

__global__ void uninitialized(int*) {
  CUDA_EMU_DYNAMIC_SHARED(uint64_t, bar);
  emu::mbarrier_arrive(bar);
}

__global__ void overwritten(int*) {
  CUDA_EMU_DYNAMIC_SHARED(uint64_t, bar);
  emu::mbarrier_init(bar, 1);
  bar[0] = 0;  // an ordinary store over the barrier
  emu::mbarrier_arrive(bar);
}

__global__ void too_many_arrivals(int*) {
  CUDA_EMU_DYNAMIC_SHARED(uint64_t, bar);
  emu::mbarrier_init(bar, 1);
  emu::mbarrier_expect_tx(bar, 16);  // the phase cannot complete, so a second arrival is one too many
  emu::mbarrier_arrive(bar);
  emu::mbarrier_arrive(bar);
}

__global__ void waits_forever(int*) {
  CUDA_EMU_DYNAMIC_SHARED(uint64_t, bar);
  if (threadIdx.x == 0) emu::mbarrier_init(bar, 64);
  __syncthreads();
  if (threadIdx.x < 32) emu::mbarrier_arrive(bar);  // only half the expected arrivals
  emu::mbarrier_try_wait_parity(bar, 0);
}

int* device_ints(size_t n) {
  void* p = nullptr;
  REQUIRE(cudaMalloc(&p, n * sizeof(int)) == cudaSuccess);
  REQUIRE(cudaMemset(p, 0, n * sizeof(int)) == cudaSuccess);
  return static_cast<int*>(p);
}

std::vector<int> to_host(const int* d, size_t n) {
  std::vector<int> h(n);
  REQUIRE(cudaMemcpy(h.data(), d, n * sizeof(int), cudaMemcpyDeviceToHost) == cudaSuccess);
  return h;
}

}  // namespace

TEST_CASE("emulated mbarrier: phases complete on the last arrival, parity waits as the ISA says") {
  int* out = device_ints(5);
  CUDA_EMU_LAUNCH(1, 64, 16, nullptr, phases)(out);
  REQUIRE(cudaGetLastError() == cudaSuccess);
  CHECK(to_host(out, 5) == std::vector<int>{1, 0, 1, 0, 0});
  cudaFree(out);
}

TEST_CASE("emulated mbarrier: a two-stage producer/consumer pipeline delivers every value in order") {
  int* out = device_ints(6);
  CUDA_EMU_LAUNCH(1, 64, 64, nullptr, pipeline)(out);  // under every schedule, compared bit for bit
  REQUIRE(cudaGetLastError() == cudaSuccess);
  CHECK(to_host(out, 6) == std::vector<int>{100, 200, 300, 400, 500, 600});
  cudaFree(out);
}

TEST_CASE("emulated mbarrier: misuse is named with the barrier's shared address") {
  int* out = device_ints(1);
  CHECK_THROWS_WITH_AS(CUDA_EMU_LAUNCH(1, 32, 16, nullptr, uninitialized)(out),
                       doctest::Contains("the mbarrier at shared address 16 was never initialized"), KernelFault);
  CHECK_THROWS_WITH_AS(CUDA_EMU_LAUNCH(1, 1, 16, nullptr, overwritten)(out),
                       doctest::Contains("was overwritten by an ordinary store since mbarrier.init"), KernelFault);
  CHECK_THROWS_WITH_AS(CUDA_EMU_LAUNCH(1, 1, 16, nullptr, too_many_arrivals)(out),
                       doctest::Contains("got more arrivals than its phase expects (1)"), KernelFault);
  CHECK_THROWS_WITH_AS(CUDA_EMU_LAUNCH(1, 64, 16, nullptr, waits_forever)(out),
                       doctest::Contains("no thread can go on: 0 (waiting at mbarrier.try_wait.parity)"), KernelFault);
  cudaFree(out);
}
