// What both Hopper backward kernels take (private to kernels/cuda/attention/hopper): the
// operands' tensor maps, the forward's statistics and the scalars, from the backward's operands
// (flash_backward_args.h). Each kernel's parameters add its outputs.
#pragma once
#include <cuda.h>

#include <cstdint>

#include "kernels/cuda/attention/flash_backward_args.h"
#include "tensor/tensor.h"

namespace qkv::kernels::cuda::hopper {

struct BackwardParams {
  CUtensorMap q, g, k, v;          // q and dO in boxes of `rows_q` rows, k and v of `rows_k`
  const float *lse, *delta;        // [B, H, T]
  const uint16_t* bias = nullptr;  // [T, S], or none
  int H = 0, Hk = 0, T = 0, S = 0, group = 1;
  float scale = 1, scale_log2 = 1;  // the softmax scale, and times log2(e): the kernels use exp2
  bool causal = false, kv_shared = false;
};

BackwardParams backward_params(const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v,
                               const BackwardArgs& a, int rows_q, int rows_k);

}  // namespace qkv::kernels::cuda::hopper
