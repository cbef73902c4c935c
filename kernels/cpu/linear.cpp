// The linear layer on the CPU. Where the GEMM library (library_gemm.h) or the skinny kernel of
// decoding (skinny_gemm.h) runs the product, the bias rides in its epilogue, added to the
// float32 accumulator, as on CUDA (kernels/cuda/linear.cu); elsewhere the unfused graph's
// kernels run (matmul, then add). In bfloat16 (which reaches the kernel only where the library
// computes it) the product is kept in float32, the bias added there and the sum rounded once;
// the bias gradient is summed in float32.
#include "kernels/cpu/compose.h"
#include "kernels/cpu/cpu_kernels.h"
#include "tensor/view.h"

namespace qkv::kernels::cpu {
namespace {
Tensor widened(const Tensor& t) { return kLowFloat.contains(t.dtype()) ? raw::to(t, DType::f32, kCPU) : t; }
}  // namespace

// Inputs (x [..., K], w [M, K], b? [M]) -> y [..., M], computed as x [N, K] -> y [N, M].
void linear(const KernelArgs& k) {
  const Tensor x = raw::as_matrix(k.in[0]), y = raw::as_matrix(k.out[0]);  // y: a view of the output
  const Tensor &w = k.in[1], &b = k.in[2];
  if (!b.defined()) return run_kernel(matmul, {x, w}, {y}, MatmulAttrs{false, true});
  if (linear_with_bias_epilogue(x, w, b, y)) return;
  const bool low = kLowFloat.contains(y.dtype());
  const Tensor product = empty(y.shape(), {low ? DType::f32 : y.dtype(), y.device()});
  run_kernel(matmul, {x, w}, {product}, MatmulAttrs{false, true});
  if (!low) return run_kernel(add, {product, b}, {y}, NoAttrs{});
  run_kernel(add, {product, widened(b)}, {product}, NoAttrs{});
  raw::copy(y, product);
}

// Inputs (dy [N, M], x [N, K]) -> (dw = dy^T x, db = the sums of dy over N).
void linear_weight_grad(const KernelArgs& k) {
  run_kernel(matmul, {k.in[0], k.in[1]}, {k.out[0]}, MatmulAttrs{true, false});
  const Tensor& db = k.out[1];
  if (!kLowFloat.contains(db.dtype())) return run_kernel(sum, {k.in[0]}, {db}, ReduceAttrs{{0}, false});
  const Tensor wide = empty(db.shape(), {DType::f32, kCPU});
  run_kernel(sum, {widened(k.in[0])}, {wide}, ReduceAttrs{{0}, false});
  raw::copy(db, wide);
}

}  // namespace qkv::kernels::cpu
