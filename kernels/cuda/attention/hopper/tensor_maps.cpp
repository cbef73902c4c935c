#include "kernels/cuda/attention/hopper/tensor_maps.h"

#include <cuda_runtime_api.h>

#include "tensor/cuda/check.h"
#include "tensor/error.h"

namespace qkv::kernels::cuda::hopper {
namespace {

using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                 const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                 CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

// cuTensorMapEncodeTiled from the driver, through the runtime (no link to libcuda).
EncodeTiled encode_tiled() {
  static EncodeTiled fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult found{};
    QKV_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &found));
    check<DeviceError>(found == cudaDriverEntryPointSuccess && p != nullptr,
                       "attention: the CUDA driver has no cuTensorMapEncodeTiled (needs CUDA 12 or newer)");
    return reinterpret_cast<EncodeTiled>(p);
  }();
  return fn;
}

}  // namespace

bool mappable(const Tensor& t) {
  if (t.dim() != 4 || (t.dtype() != DType::bf16 && t.dtype() != DType::f16) || t.stride(3) != 1) return false;
  if (reinterpret_cast<uintptr_t>(t.raw_data()) % 16 != 0) return false;
  for (int d = 0; d < 3; ++d) {
    const int64_t bytes = t.stride(d) * 2;
    if (bytes <= 0 || bytes % 16 != 0 || bytes >= (int64_t(1) << 40)) return false;
  }
  return true;
}

CUtensorMap head_rows_map(const Tensor& t, int rows) {
  CUtensorMap map;
  const cuuint64_t dims[4] = {cuuint64_t(t.size(3)), cuuint64_t(t.size(2)), cuuint64_t(t.size(1)),
                              cuuint64_t(t.size(0))};
  const cuuint64_t strides[3] = {cuuint64_t(t.stride(2) * 2), cuuint64_t(t.stride(1) * 2), cuuint64_t(t.stride(0) * 2)};
  const cuuint32_t box[4] = {64, cuuint32_t(rows), 1, 1}, ones[4] = {1, 1, 1, 1};
  const CUtensorMapDataType type =
      t.dtype() == DType::bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  const CUresult r = encode_tiled()(&map, type, 4, const_cast<void*>(t.raw_data()), dims, strides, box, ones,
                                    CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                    CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  check<DeviceError>(r == CUDA_SUCCESS, "attention: cuTensorMapEncodeTiled refused a [", t.size(0), ", ", t.size(1),
                     ", ", t.size(2), ", ", t.size(3), "] operand (CUresult ", int(r), ")");
  return map;
}

}  // namespace qkv::kernels::cuda::hopper
