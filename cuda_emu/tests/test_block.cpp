// The emulated thread block (cuda_emu/block.h) and its warp shuffles and votes
// (warp_shuffle.h), on which device code runs on the CPU: a barrier orders shared-memory writes
// before reads under every schedule, while a missing barrier shows up as results that change
// with the schedule; threads that leave a barrier or a shuffle's mask are reported; the shuffles
// and votes give what the CUDA Programming Guide says.
#include <doctest/doctest.h>

#include <numeric>
#include <vector>

#include "cuda_emu/block.h"
#include "cuda_emu/warp_shuffle.h"

using namespace qkv;
using cuda_emu::Schedule;

namespace {

constexpr int kThreads = 128;

// Each thread writes its slot of a shared array, then reads its neighbour's: with the barrier
// between, the neighbour's value; without it, whatever the schedule left there.
std::vector<int> neighbour_reads(bool barrier, Schedule schedule, uint64_t seed = 0) {
  std::vector<int> shared(kThreads, -1), got(kThreads);
  cuda_emu::run_block(
      kThreads,
      [&](int t) {
        shared[size_t(t)] = t * t;
        if (barrier) cuda_emu::sync_threads();
        got[size_t(t)] = shared[size_t((t + 1) % kThreads)];
      },
      schedule, seed);
  return got;
}

}  // namespace

TEST_CASE(
    "emulated block: a barrier orders writes before reads under every schedule, and without it the schedule shows") {
  std::vector<int> want(kThreads);
  for (int t = 0; t < kThreads; ++t) want[size_t(t)] = ((t + 1) % kThreads) * ((t + 1) % kThreads);
  for (Schedule s : {Schedule::forward, Schedule::reverse, Schedule::shuffled})
    CHECK(neighbour_reads(true, s, 7) == want);
  // The race: forward, thread t reads t + 1 before it runs; in reverse, after.
  CHECK(neighbour_reads(false, Schedule::forward) != neighbour_reads(false, Schedule::reverse));
}

TEST_CASE("emulated block: threads that leave before a barrier others wait at are reported") {
  CHECK_THROWS_WITH_AS(cuda_emu::run_block(64,
                                           [](int t) {
                                             if (t == 40) return;
                                             cuda_emu::sync_threads();
                                           }),
                       doctest::Contains("which threads 40 (exited) left without reaching"), cuda_emu::Divergence);
  CHECK_THROWS_WITH_AS(cuda_emu::run_block(2000, [](int) {}), doctest::Contains("2000 threads per block"),
                       cuda_emu::EmulatorError);
}

TEST_CASE("emulated warp shuffles: xor reduction, up, down, index within segments, and votes") {
  std::vector<float> sums(64);
  std::vector<int> ups(64), downs(64), bcast(64);
  std::vector<uint32_t> ballots(64);
  std::vector<int> alls(64), anys(64);
  cuda_emu::run_block(64, [&](int t) {
    const int lane = cuda_emu::lane_id();
    float x = float(t);
    for (int off = 16; off > 0; off /= 2) x += __shfl_xor_sync(cuda_emu::kFullMask, x, off);
    sums[size_t(t)] = x;
    ups[size_t(t)] = __shfl_up_sync(cuda_emu::kFullMask, t, 3, 8);
    downs[size_t(t)] = __shfl_down_sync(cuda_emu::kFullMask, t, 1);
    bcast[size_t(t)] = __shfl_sync(cuda_emu::kFullMask, t * 10, 5, 16);
    ballots[size_t(t)] = __ballot_sync(cuda_emu::kFullMask, lane % 3 == 0);
    alls[size_t(t)] = __all_sync(cuda_emu::kFullMask, t < 32);
    anys[size_t(t)] = __any_sync(cuda_emu::kFullMask, lane == 31);
  });
  uint32_t every_third = 0;
  for (int lane = 0; lane < 32; lane += 3) every_third |= 1u << lane;
  for (int t = 0; t < 64; ++t) {
    const int w0 = t / 32 * 32, lane = t % 32;
    CHECK(sums[size_t(t)] == float(32 * w0 + 31 * 32 / 2));  // each warp's own lanes
    CHECK(ups[size_t(t)] == (lane % 8 >= 3 ? t - 3 : t));
    CHECK(downs[size_t(t)] == (lane < 31 ? t + 1 : t));
    CHECK(bcast[size_t(t)] == 10 * (t / 16 * 16 + 5));
    CHECK(ballots[size_t(t)] == every_third);
    CHECK(alls[size_t(t)] == (t < 32));
    CHECK(anys[size_t(t)] == 1);
  }
}

TEST_CASE("emulated warp shuffles: a lane missing from the mask, or reading outside it, is reported") {
  // Lanes 0..15 shuffle with the full mask while 16..31 never do.
  CHECK_THROWS_WITH_AS(cuda_emu::run_warp([](int lane) {
                         if (lane < 16) (void)__shfl_xor_sync(cuda_emu::kFullMask, lane, 1);
                       }),
                       doctest::Contains("lanes of that mask are elsewhere: 16 (exited)"), cuda_emu::Divergence);
  // Half a warp shuffles among itself, but lane 15 reads lane 16.
  CHECK_THROWS_WITH_AS(cuda_emu::run_warp([](int lane) {
                         if (lane < 16) (void)__shfl_down_sync(0x0000ffffu, lane, 1);
                       }),
                       doctest::Contains("lane 15 reads lane 16, which is not in mask 0xffff"), cuda_emu::Divergence);
  CHECK_THROWS_WITH_AS(cuda_emu::run_warp([](int lane) { (void)__shfl_xor_sync(0x1u, lane, 1); }),
                       doctest::Contains("which leaves out its own lane"), cuda_emu::Divergence);
}
