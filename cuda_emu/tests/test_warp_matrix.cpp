// ldmatrix and the warp collectives' meeting rules (cuda_emu/warp_matrix.h, cuda_emu/block.h):
// a row address that is misaligned or outside the block's shared memory is an error naming the
// lane, and lanes that skip a collective or meet at different ones are reported. (The models'
// fragment layouts are checked through whole products in tests/kernels/test_flash_fragments.cpp.)
#include <doctest/doctest.h>

#include <cstdint>

#include "cuda_emu/block.h"
#include "cuda_emu/error.h"
#include "cuda_emu/shared_memory.h"
#include "cuda_emu/warp_matrix.h"

using namespace qkv;

TEST_CASE("emulated ldmatrix: a misaligned or non-shared row address is an error naming the lane") {
  alignas(16) static uint16_t tile[32 * 16];
  uint32_t r[4];
  auto load_rows = [&](int offset) {
    cuda_emu::run_warp([&](int lane) { cuda_emu::ldmatrix_x4(r, tile + lane * 8 + (lane == 5 ? offset : 0), false); });
  };
  {
    const cuda_emu::SharedWindow shared(tile, sizeof tile);
    CHECK_NOTHROW(load_rows(0));
    CHECK_THROWS_WITH_AS(load_rows(1), doctest::Contains("lane 5's row address is not 16-byte aligned"),
                         cuda_emu::SharedMemoryError);
  }
  CHECK_THROWS_WITH_AS(load_rows(0), doctest::Contains("no shared memory is installed"), cuda_emu::SharedMemoryError);
}

TEST_CASE("emulated warp: lanes that skip a collective or meet at different ones are reported") {
  alignas(16) static uint16_t tile[32 * 8];
  const cuda_emu::SharedWindow shared(tile, sizeof tile);
  CHECK_THROWS_WITH_AS(cuda_emu::run_warp([&](int lane) {
                         uint32_t r[4];
                         if (lane != 7) cuda_emu::ldmatrix_x4(r, tile + lane * 8, false);
                       }),
                       doctest::Contains("lanes of that mask are elsewhere: 7 (exited)"), cuda_emu::Divergence);
  CHECK_THROWS_WITH_AS(cuda_emu::run_warp([&](int lane) {
                         uint32_t r[4];
                         cuda_emu::ldmatrix_x4(r, tile + lane * 8, lane == 3);
                       }),
                       doctest::Contains("3 (at ldmatrix.x4.trans)"), cuda_emu::Divergence);
  int lanes_run = 0;
  cuda_emu::run_warp([&](int lane) { lanes_run += cuda_emu::lane_id() == lane; });
  CHECK(lanes_run == cuda_emu::kLanes);
}
