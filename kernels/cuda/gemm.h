// One cuBLASLt GEMM with a fused epilogue (kernels/cuda/matmul.cpp), for the linear kernels
// (kernels/cuda/linear.cu). Private to kernels/cuda/.
#pragma once
#include <cstdint>

#include "tensor/tensor.h"

namespace qkv::kernels::cuda {

// What cuBLASLt does after the product (its cublasLtEpilogue_t), with the per-call vector.
struct GemmEpilogue {
  enum class Kind : uint8_t {
    none,
    bias,         // out += bias, one value per column of our row-major out (BIAS)
    bias_grad_b,  // bias = the sums of op(a) [m, k] over k, one per row of op(a) (BGRADB)
  };
  Kind kind = Kind::none;
  const void* bias = nullptr;  // read (bias) or written (bias_grad_b): out's dtype, contiguous
};

// out = op(a) @ op(b) for 2-d operands with the epilogue, in one cuBLASLt call with cached
// descriptors. False, with nothing enqueued, when cuBLASLt has no algorithm for the epilogue
// at these shapes and types (the caller then runs the epilogue itself).
bool run_gemm(const Tensor& a, const Tensor& b, const Tensor& out, bool trans_a, bool trans_b,
              const GemmEpilogue& epilogue);

}  // namespace qkv::kernels::cuda
