#include "cuda_emu/tensor_copy.h"

#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "cuda_emu/block.h"
#include "cuda_emu/device_memory.h"
#include "cuda_emu/error.h"
#include "cuda_emu/mbarrier.h"
#include "cuda_emu/shared_memory.h"

namespace qkv::cuda_emu {
namespace {

constexpr uint32_t kMagic = 0x514b564d;  // marks a map this emulator encoded

// What a CUtensorMap holds here (its 128 opaque bytes).
struct TensorMap {
  uint32_t magic;
  uint8_t rank, element_bytes, swizzle;  // swizzle: 0 none, 1 32B, 2 64B, 3 128B
  uint8_t unused;
  const unsigned char* global;
  uint64_t dims[5];
  uint64_t strides[5];  // bytes; strides[0] is the element size
  uint16_t box[5];
};
static_assert(sizeof(TensorMap) <= sizeof(CUtensorMap) && std::is_trivially_copyable_v<TensorMap>);

thread_local std::string refusal;

CUresult refuse(std::string why) {
  refusal = "cuTensorMapEncodeTiled: " + std::move(why);
  return CUDA_ERROR_INVALID_VALUE;
}

int element_bytes(CUtensorMapDataType t) {
  switch (t) {
    case CU_TENSOR_MAP_DATA_TYPE_UINT8: return 1;
    case CU_TENSOR_MAP_DATA_TYPE_UINT16:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT16:
    case CU_TENSOR_MAP_DATA_TYPE_BFLOAT16: return 2;
    case CU_TENSOR_MAP_DATA_TYPE_UINT32:
    case CU_TENSOR_MAP_DATA_TYPE_INT32:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ: return 4;
    case CU_TENSOR_MAP_DATA_TYPE_UINT64:
    case CU_TENSOR_MAP_DATA_TYPE_INT64:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT64: return 8;
    default: return 0;  // the packed sub-byte types: not modelled
  }
}

// The swizzle span in bytes of a mode (0 for none), -1 for a mode not modelled.
int swizzle_span(CUtensorMapSwizzle s) {
  switch (s) {
    case CU_TENSOR_MAP_SWIZZLE_NONE: return 0;
    case CU_TENSOR_MAP_SWIZZLE_32B: return 32;
    case CU_TENSOR_MAP_SWIZZLE_64B: return 64;
    case CU_TENSOR_MAP_SWIZZLE_128B: return 128;
    default: return -1;
  }
}

const TensorMap& decode(const CUtensorMap* map, const char* what) {
  const auto* m = reinterpret_cast<const TensorMap*>(map);
  require<EmulatorError>(m->magic == kMagic, what, ": the tensor map was not made by cuTensorMapEncodeTiled");
  return *m;
}

// One issued copy: the box read and written when it lands.
struct BoxCopy final : AsyncWork {
  TensorMap map;
  int32_t coords[5];
  uint32_t dst;  // window address
  uint32_t bar;  // window address of the mbarrier
  uint32_t bytes;

  const char* name() const override { return "cp.async.bulk.tensor"; }

  void complete() override {
    const int rank = map.rank, eb = map.element_bytes;
    std::vector<unsigned char> box(bytes, 0);
    uint64_t count = 1;
    for (int d = 0; d < rank; ++d) count *= map.box[d];
    {
      const DeviceAccess access;  // the global side of the copy
      int64_t idx[5] = {0, 0, 0, 0, 0};
      for (uint64_t e = 0; e < count; ++e) {
        bool inside = true;
        uint64_t offset = 0;
        for (int d = 0; d < rank; ++d) {
          const int64_t c = int64_t(coords[d]) + idx[d];
          inside = inside && c >= 0 && uint64_t(c) < map.dims[d];
          offset += uint64_t(c) * map.strides[d];
        }
        if (inside) std::memcpy(&box[e * uint64_t(eb)], map.global + offset, size_t(eb));
        for (int d = 0; d < rank && ++idx[d] == map.box[d]; ++d) idx[d] = 0;
      }
    }
    // Each 16-byte chunk to its swizzled place.
    for (uint32_t o = 0; o < bytes; o += 16)
      async_store(swizzle_address(dst + o, map.swizzle), &box[o], std::min<uint32_t>(16, bytes - o));
    mbarrier_complete_tx(bar, bytes);
  }
};

}  // namespace

CUresult encode_tensor_map_tiled(CUtensorMap* out, CUtensorMapDataType type, cuuint32_t rank, void* global,
                                 const cuuint64_t* dims, const cuuint64_t* strides, const cuuint32_t* box,
                                 const cuuint32_t* element_strides, CUtensorMapInterleave interleave,
                                 CUtensorMapSwizzle swizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill fill) {
  if (reinterpret_cast<uintptr_t>(out) % 64 != 0) return refuse("the tensor map's address must be 64-byte aligned");
  const int eb = element_bytes(type);
  if (eb == 0) return refuse(str("data type ", int(type), " is not modelled"));
  if (rank < 1 || rank > 5) return refuse(str("rank ", rank, " (expected 1 to 5)"));
  if (reinterpret_cast<uintptr_t>(global) % 16 != 0) return refuse("globalAddress must be 16-byte aligned");
  if (interleave != CU_TENSOR_MAP_INTERLEAVE_NONE) return refuse("interleaved layouts are not modelled");
  if (fill != CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) return refuse("the NaN out-of-bounds fill is not modelled");
  const int span = swizzle_span(swizzle);
  if (span < 0) return refuse("the 128B_ATOM swizzle modes are not modelled");
  TensorMap m{};
  m.magic = kMagic;
  m.rank = uint8_t(rank);
  m.element_bytes = uint8_t(eb);
  m.swizzle = uint8_t(span == 0 ? 0 : span == 32 ? 1 : span == 64 ? 2 : 3);
  m.global = static_cast<const unsigned char*>(global);
  for (cuuint32_t d = 0; d < rank; ++d) {
    if (dims[d] == 0 || dims[d] > (uint64_t(1) << 32))
      return refuse(str("globalDim[", d, "] = ", dims[d], " (expected 1 to 2^32)"));
    if (box[d] == 0 || box[d] > 256) return refuse(str("boxDim[", d, "] = ", box[d], " (expected 1 to 256)"));
    if (element_strides[d] != 1)
      return refuse(str("elementStrides[", d, "] = ", element_strides[d], ": only 1 is modelled"));
    m.dims[d] = dims[d];
    m.box[d] = uint16_t(box[d]);
    if (d == 0) {
      m.strides[0] = uint64_t(eb);
      continue;
    }
    const uint64_t s = strides[d - 1];
    if (s % 16 != 0 || s >= (uint64_t(1) << 40))
      return refuse(str("globalStrides[", d - 1, "] = ", s, " (expected a multiple of 16 below 2^40)"));
    m.strides[d] = s;
  }
  const uint64_t inner = uint64_t(box[0]) * uint64_t(eb);
  if (inner % 16 != 0) return refuse(str("boxDim[0] * element size = ", inner, " bytes (expected a multiple of 16)"));
  if (span > 0 && inner > uint64_t(span))
    return refuse(str("the box's inner dimension, ", inner, " bytes, exceeds the swizzle span of ", span, " bytes"));
  if (span > 0 && inner != uint64_t(span))
    return refuse(str("a box inner dimension of ", inner, " bytes under a ", span,
                      "-byte swizzle is allowed but not modelled (only equal sizes are)"));
  std::memset(out, 0, sizeof(CUtensorMap));
  std::memcpy(out, &m, sizeof m);
  return CUDA_SUCCESS;
}

const char* last_tensor_map_error() { return refusal.c_str(); }

void bulk_tensor_load(void* dst, const CUtensorMap* map, const int32_t* coords, int rank, uint64_t* bar) {
  const char* what = "cp.async.bulk.tensor";
  const TensorMap& m = decode(map, what);
  require<EmulatorError>(rank == m.rank, what, ": a ", rank, "d copy with a tensor map of rank ", int(m.rank));
  auto work = std::make_unique<BoxCopy>();
  work->map = m;
  uint64_t bytes = m.element_bytes;
  for (int d = 0; d < rank; ++d) {
    work->coords[d] = coords[d];
    bytes *= m.box[d];
  }
  work->bytes = uint32_t(bytes);
  work->dst = shared_address(dst, bytes, what);
  require<SharedMemoryError>(work->dst % 128 == 0, what, ": the destination, shared address ", work->dst,
                             ", is not 128-byte aligned");
  const uint32_t span = m.swizzle == 0 ? 0 : 16u << m.swizzle;
  require<SharedMemoryError>(span == 0 || work->dst % (8 * span) == 0, what, ": the destination, shared address ",
                             work->dst, ", is not aligned to the ", 8 * span, " bytes of its swizzle pattern");
  work->bar = shared_address(bar, 8, what);
  require_async_barrier(work->bar, what);
  poison_shared(work->dst, bytes);
  post_async(std::move(work));
}

}  // namespace qkv::cuda_emu
