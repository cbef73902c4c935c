// The host-side plan of a batched matmul for cuBLASLt: every decision kernels/cuda/matmul.cpp
// makes (which operands are read in place and which are packed first, the column-major view
// cuBLASLt is given, batch strides, folding batches into rows, alignment inputs), as plain data.
// No CUDA here: the plan is built in every build and checked in CI against a naive GEMM that
// reads memory as cuBLASLt would (tests/kernels/test_gemm_plan.cpp).
//
// The semantics are those of kernels/cpu/matmul.cpp: out [..., m, n] = op(a) [..., m, k] @
// op(b) [..., k, n] with broadcast batch dims, op(X) = X^T when the trans flag is set. Our
// tensors are row-major and cuBLASLt is column-major: the row-major out [m, n] is the
// column-major out^T [n, m], so cuBLASLt computes D = op_A(A) op_B(B) with its A from our b,
// its B from our a and its C = D our out:
//
//   cublasLtMatmul(A = plan.b, B = plan.a, C = D = plan.c),  D [n, m] = op_A [n, k] op_B [k, m].
#pragma once
#include <cstdint>

#include "tensor/tensor.h"

namespace qkv::kernels {

// One matrix of the call (an input or the output) as cuBLASLt reads or writes it. Batch i's
// matrix is the column-major rows x cols matrix with leading dim ld whose element (r, c) is
// element  offset + i * batch_stride + r + c * ld  of the storage of the tensor read.
struct GemmMatrix {
  // Inputs only: when set, cuBLASLt reads a packed copy instead of the input x: a fresh
  // contiguous tensor of shape packed_shape (x's own shape, or the full batch shape followed by
  // x's last two dims when x's broadcast batch does not reduce to one stride) filled with x
  // broadcast to that shape (raw::copy). Unset: x is read in place.
  bool packed = false;
  Shape packed_shape;
  int64_t rows = 0, cols = 0;  // the cuBLASLt layout's rows and columns (column-major)
  int64_t ld = 0;              // its leading dimension, >= rows
  bool transpose = false;      // CUBLAS_OP_T: cuBLASLt multiplies this matrix's transpose
  int64_t offset = 0;          // elements from storage()->data() of the tensor read to batch 0's (0, 0)
  int64_t batch_stride = 0;    // elements between consecutive batches' matrices; 0 when every batch
                               // reads the same matrix (a broadcast operand) or batch_count == 1
  // What gemm_alignment() takes besides the pointer: the batch stride in bytes when
  // batch_count > 1 (each batch's matrix must be aligned too), else 0.
  int64_t align_stride_bytes = 0;
};

enum class GemmKind : uint8_t {
  nothing,    // out has no elements
  zero_fill,  // the inner dim k is 0: out is all zeros, no GEMM
  gemm,       // one cuBLASLt call as the plan says; then m, n, k and batch_count are all > 0
};

struct GemmPlan {
  GemmKind kind = GemmKind::nothing;
  DType dtype = DType::f32;
  // Per batch, the row-major out [m, n] = op(a) [m, k] @ op(b) [k, n]. After folding, m is the
  // folded row count (batches * rows per batch). cuBLASLt's own m and n are our n and m.
  int64_t m = 0, n = 0, k = 0;
  int64_t batch_count = 0;  // batches of the strided-batched call (1: a plain GEMM)
  // The batches were folded into rows: b is shared by every batch and a's batches are evenly
  // spaced row blocks of one row-major matrix, so the call is one GEMM of (batches * m) rows
  // whose output rows are out's batches one after another.
  bool folded = false;
  GemmMatrix a;  // our first input: cuBLASLt's B
  GemmMatrix b;  // our second input: cuBLASLt's A
  GemmMatrix c;  // out (never packed: out must be contiguous): cuBLASLt's C and D
};

// Plans out = op(a) @ op(b) for the matmul kernel. out has the shape the matmul shape rule
// gives (autograd/shape_rules.cpp) and must be contiguous; a and b are any strided views.
// Throws ValueError when the batch count exceeds what cuBLASLt takes (int32).
GemmPlan plan_gemm(const Tensor& a, const Tensor& b, const Tensor& out, bool trans_a, bool trans_b);

// The minimum alignment (bytes) to promise cuBLASLt for a matrix at `address` whose batches are
// batch_stride_bytes apart: the largest power of two, at most 256, dividing both.
uint32_t gemm_alignment(uint64_t address, int64_t batch_stride_bytes);

}  // namespace qkv::kernels
