// Tensor maps for the bulk tensor copy (private to kernels/cuda/attention/hopper): a [B, H, L, D]
// view of 16-bit elements, its last dim contiguous, as a 4D map (D, L, H, B) whose box is 64
// columns by `rows` rows of one head, copied under the 128B swizzle (hopper/wgmma.cuh: tiles).
#pragma once
#include <cuda.h>

#include "tensor/tensor.h"

namespace qkv::kernels::cuda::hopper {

// Whether t can be mapped: 16-bit, 4-d, last dim contiguous, a 16-byte aligned start and the
// other strides non-zero multiples of 16 bytes below 2^40.
bool mappable(const Tensor& t);

// The map of t (mappable) with boxes of 64 columns by `rows` rows (1 .. 256); out-of-range rows
// and columns of a box arrive as zeros.
CUtensorMap head_rows_map(const Tensor& t, int rows);

}  // namespace qkv::kernels::cuda::hopper
