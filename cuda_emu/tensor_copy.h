// The bulk tensor copy (TMA) for the emulated device: tensor maps as cuTensorMapEncodeTiled
// makes them (driver API, cuda.h's documentation of its parameters), and
//   cp.async.bulk.tensor.{1..5}d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// modelled from the PTX ISA's text: the box at the given coordinates (signed, per dimension) is
// read from global memory, elements outside the tensor filled with zeros, and written into shared
// memory in box order (dimension 0 fastest) at the destination, each 16-byte chunk moved by the
// map's swizzle; its byte count is then completed on the mbarrier (complete_tx). The copy is
// asynchronous (cuda_emu/block.h): when it is issued its destination is poisoned, and it lands
// at a point the schedule chooses, or when a thread could otherwise not go on.
//
// Swizzle (what the shared address bits give, so the same function as wgmma's): for the 32B,
// 64B and 128B modes, bits [4, 4 + b) of the shared address are XORed with bits [7, 7 + b), b =
// 1, 2, 3. Not modelled, and refused at encoding: interleaved layouts, element strides other
// than 1, the NaN out-of-bounds fill, the 128B_ATOM swizzles, the packed sub-byte types, and a
// swizzled box whose inner dimension is narrower than the swizzle span.
#pragma once
#include <cuda.h>

#include <cstdint>

namespace qkv::cuda_emu {

// cuTensorMapEncodeTiled: CUDA_ERROR_INVALID_VALUE for what the documentation refuses (or the
// emulator does not model), and the reason for the last refusal in last_tensor_map_error().
CUresult encode_tensor_map_tiled(CUtensorMap* map, CUtensorMapDataType type, cuuint32_t rank, void* global,
                                 const cuuint64_t* dims, const cuuint64_t* strides, const cuuint32_t* box,
                                 const cuuint32_t* element_strides, CUtensorMapInterleave interleave,
                                 CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill fill);
const char* last_tensor_map_error();

// cp.async.bulk.tensor: `coords` has the map's rank entries.
void bulk_tensor_load(void* dst, const CUtensorMap* map, const int32_t* coords, int rank, uint64_t* bar);

// The shared address `address` moved by swizzle mode `swizzle` (0: none, 1: 32B, 2: 64B, 3: 128B).
inline uint32_t swizzle_address(uint32_t address, int swizzle) {
  const uint32_t mask = (1u << swizzle) - 1u;
  return address ^ (((address >> 7) & mask) << 4);
}

}  // namespace qkv::cuda_emu
