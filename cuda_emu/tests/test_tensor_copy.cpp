// The bulk tensor copy model (cuda_emu/tensor_copy.h): what cuTensorMapEncodeTiled refuses by its
// documentation, the swizzle patterns the ISA draws (128B: 16-byte chunk c of 128-byte row r at
// chunk c ^ r of an 8-row, 1024-byte pattern; 64B: chunk c of 64-byte row r at c ^ (r / 2 % 4)),
// out-of-bounds elements filled with zeros, the byte count completed on the mbarrier, and a
// reader that does not wait for the copy.
#include <doctest/doctest.h>

#include <cuda.h>

#include <cstring>
#include <string>
#include <vector>

#include "cuda_emu/error.h"

namespace {

namespace emu = qkv::cuda_emu;
using emu::KernelFault;

constexpr int kRows = 16, kCols = 64;  // the global tensor: [16][64] uint16, element (r, c) = 1000 r + c

// A [box_rows][box_cols] box at (col0, row0) into a 1024-aligned tile, then every thread copies
// the tile's bytes out. `wait` false: the readers wait for the copy only after reading.
__global__ void copy_box(const CUtensorMap* map, int col0, int row0, int tile_bytes, bool wait, uint16_t* out) {
  CUDA_EMU_DYNAMIC_SHARED(unsigned char, smem);
  const uint32_t base = __cvta_generic_to_shared(smem);
  unsigned char* tile = smem + (1024 - base % 1024) % 1024;
  auto* bar = reinterpret_cast<uint64_t*>(tile + tile_bytes);
  if (threadIdx.x == 0) {
    emu::mbarrier_init(bar, 1);
    emu::fence_mbarrier_init();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    emu::mbarrier_arrive_expect_tx(bar, uint32_t(tile_bytes));
    const int32_t coords[2] = {col0, row0};
    emu::bulk_tensor_load(tile, map, coords, 2, bar);
  }
  if (wait) emu::mbarrier_try_wait_parity(bar, 0);
  for (int i = int(threadIdx.x); i < tile_bytes / 2; i += int(blockDim.x))
    out[i] = reinterpret_cast<const uint16_t*>(tile)[i];
  if (!wait) emu::mbarrier_try_wait_parity(bar, 0);
}

__global__ void unfenced_barrier(const CUtensorMap* map, uint16_t*) {
  CUDA_EMU_DYNAMIC_SHARED(unsigned char, smem);
  unsigned char* tile = smem + (1024 - __cvta_generic_to_shared(smem) % 1024) % 1024;
  auto* bar = reinterpret_cast<uint64_t*>(tile + 1024);
  emu::mbarrier_init(bar, 1);  // no fence: the copy engine cannot see the barrier yet
  const int32_t coords[2] = {0, 0};
  emu::bulk_tensor_load(tile, map, coords, 2, bar);
}

struct Global {
  uint16_t* data = nullptr;
  Global() {
    std::vector<uint16_t> host(kRows * kCols);
    for (int r = 0; r < kRows; ++r)
      for (int c = 0; c < kCols; ++c) host[size_t(r * kCols + c)] = uint16_t(1000 * r + c);
    REQUIRE(cudaMalloc(reinterpret_cast<void**>(&data), host.size() * 2) == cudaSuccess);
    REQUIRE(cudaMemcpy(data, host.data(), host.size() * 2, cudaMemcpyHostToDevice) == cudaSuccess);
  }
  ~Global() { cudaFree(data); }
};

// A map of the [16][64] tensor with a [rows][cols] box; the CUtensorMap lives in device memory,
// as a kernel parameter's copy would.
CUresult encode(CUtensorMap* map, void* global, uint32_t box_cols, uint32_t box_rows, CUtensorMapSwizzle swizzle,
                uint64_t row_stride = kCols * 2) {
  const cuuint64_t dims[2] = {kCols, kRows}, strides[1] = {row_stride};
  const cuuint32_t box[2] = {box_cols, box_rows}, ones[2] = {1, 1};
  return emu::encode_tensor_map_tiled(map, CU_TENSOR_MAP_DATA_TYPE_UINT16, 2, global, dims, strides, box, ones,
                                      CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                                      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}

// Runs copy_box and returns the tile as the kernel read it.
std::vector<uint16_t> load(const CUtensorMap& host_map, int col0, int row0, int tile_bytes, bool wait) {
  CUtensorMap* map = nullptr;
  uint16_t* out = nullptr;
  REQUIRE(cudaMalloc(reinterpret_cast<void**>(&map), sizeof(CUtensorMap)) == cudaSuccess);
  REQUIRE(cudaMemcpy(map, &host_map, sizeof(CUtensorMap), cudaMemcpyHostToDevice) == cudaSuccess);
  REQUIRE(cudaMalloc(reinterpret_cast<void**>(&out), size_t(tile_bytes)) == cudaSuccess);
  CUDA_EMU_LAUNCH(1, 128, 1024 + tile_bytes + 16, nullptr, copy_box)(map, col0, row0, tile_bytes, wait, out);
  std::vector<uint16_t> tile(size_t(tile_bytes / 2));
  REQUIRE(cudaMemcpy(tile.data(), out, size_t(tile_bytes), cudaMemcpyDeviceToHost) == cudaSuccess);
  cudaFree(map);
  cudaFree(out);
  return tile;
}

}  // namespace

TEST_CASE("emulated bulk copy: cuTensorMapEncodeTiled refuses what its documentation refuses") {
  const Global g;
  CUtensorMap map;
  CHECK(encode(&map, g.data, 64, 8, CU_TENSOR_MAP_SWIZZLE_128B) == CUDA_SUCCESS);
  CHECK(encode(&map, reinterpret_cast<char*>(g.data) + 8, 64, 8, CU_TENSOR_MAP_SWIZZLE_NONE) ==
        CUDA_ERROR_INVALID_VALUE);
  CHECK(std::string(emu::last_tensor_map_error()).find("globalAddress must be 16-byte aligned") != std::string::npos);
  CHECK(encode(&map, g.data, 64, 8, CU_TENSOR_MAP_SWIZZLE_64B) == CUDA_ERROR_INVALID_VALUE);
  CHECK(std::string(emu::last_tensor_map_error()).find("exceeds the swizzle span of 64 bytes") != std::string::npos);
  CHECK(encode(&map, g.data, 4, 8, CU_TENSOR_MAP_SWIZZLE_NONE) == CUDA_ERROR_INVALID_VALUE);  // 8 bytes wide
  CHECK(std::string(emu::last_tensor_map_error()).find("expected a multiple of 16") != std::string::npos);
  CHECK(encode(&map, g.data, 64, 8, CU_TENSOR_MAP_SWIZZLE_NONE, 120) == CUDA_ERROR_INVALID_VALUE);
  CHECK(encode(&map, g.data, 64, 300, CU_TENSOR_MAP_SWIZZLE_NONE) == CUDA_ERROR_INVALID_VALUE);
}

TEST_CASE("emulated bulk copy: the 128B swizzle puts chunk c of row r at chunk c ^ r") {
  const Global g;
  CUtensorMap map;
  REQUIRE(encode(&map, g.data, 64, 8, CU_TENSOR_MAP_SWIZZLE_128B) == CUDA_SUCCESS);
  const std::vector<uint16_t> tile = load(map, 0, 8, 1024, true);  // rows 8 .. 15
  for (int r = 0; r < 8; ++r)
    for (int c = 0; c < 64; ++c) {
      const int at = r * 64 + ((c / 8) ^ r) * 8 + c % 8;
      CHECK_MESSAGE(tile[size_t(at)] == 1000 * (8 + r) + c, "row ", r, " column ", c);
    }
}

TEST_CASE("emulated bulk copy: the 64B swizzle puts chunk c of 64-byte row r at chunk c ^ (r / 2 % 4)") {
  const Global g;
  CUtensorMap map;
  REQUIRE(encode(&map, g.data, 32, 8, CU_TENSOR_MAP_SWIZZLE_64B) == CUDA_SUCCESS);
  const std::vector<uint16_t> tile = load(map, 32, 0, 512, true);  // columns 32 .. 63
  for (int r = 0; r < 8; ++r)
    for (int c = 0; c < 32; ++c) {
      const int at = r * 32 + ((c / 8) ^ (r / 2 % 4)) * 8 + c % 8;
      CHECK_MESSAGE(tile[size_t(at)] == 1000 * r + 32 + c, "row ", r, " column ", c);
    }
}

TEST_CASE("emulated bulk copy: elements outside the tensor arrive as zeros, and the full box counts") {
  const Global g;
  CUtensorMap map;
  REQUIRE(encode(&map, g.data, 64, 8, CU_TENSOR_MAP_SWIZZLE_NONE) == CUDA_SUCCESS);
  const std::vector<uint16_t> tile = load(map, -8, 12, 1024, true);  // rows 12 .. 19, columns -8 .. 55
  for (int r = 0; r < 8; ++r)
    for (int c = 0; c < 64; ++c) {
      const int row = 12 + r, col = c - 8;
      const int want = row < kRows && col >= 0 ? 1000 * row + col : 0;
      CHECK_MESSAGE(tile[size_t(r * 64 + c)] == want, "row ", row, " column ", col);
    }
}

TEST_CASE("emulated bulk copy: a reader that does not wait for the copy reads NaN, whatever the schedule") {
  const Global g;
  CUtensorMap map;
  REQUIRE(encode(&map, g.data, 64, 8, CU_TENSOR_MAP_SWIZZLE_NONE) == CUDA_SUCCESS);
  for (uint16_t x : load(map, 0, 0, 1024, false)) CHECK(x == 0xffff);
}

TEST_CASE("emulated bulk copy: a copy to a barrier the async proxy cannot see yet is refused") {
  const Global g;
  CUtensorMap host_map;
  REQUIRE(encode(&host_map, g.data, 64, 8, CU_TENSOR_MAP_SWIZZLE_NONE) == CUDA_SUCCESS);
  CUtensorMap* map = nullptr;
  REQUIRE(cudaMalloc(reinterpret_cast<void**>(&map), sizeof(CUtensorMap)) == cudaSuccess);
  REQUIRE(cudaMemcpy(map, &host_map, sizeof(CUtensorMap), cudaMemcpyHostToDevice) == cudaSuccess);
  CHECK_THROWS_WITH_AS(CUDA_EMU_LAUNCH(1, 1, 4096, nullptr, unfenced_barrier)(map, nullptr),
                       doctest::Contains("no fence.mbarrier_init or fence.proxy.async made that visible"), KernelFault);
  cudaFree(map);
}
