// The linear layer on the CPU: the same kernels the unfused graph runs (matmul, add, sum), so
// linear(x, w, b) equals matmul(x, w^T) + b bit for bit here; the fusion pays on CUDA
// (kernels/cuda/linear.cu), where the bias and the bias gradient ride in the GEMM's epilogue.
#include "kernels/cpu/compose.h"
#include "kernels/cpu/cpu_kernels.h"

namespace qkv::kernels::cpu {

// Inputs (x [N, K], w [M, K], b? [M]) -> y [N, M].
void linear(const KernelArgs& k) {
  const Tensor &x = k.in[0], &w = k.in[1], &b = k.in[2], &y = k.out[0];
  if (!b.defined()) return run_kernel(matmul, {x, w}, {y}, MatmulAttrs{false, true});
  const Tensor product = empty(y.shape(), {y.dtype(), y.device()});
  run_kernel(matmul, {x, w}, {product}, MatmulAttrs{false, true});
  run_kernel(add, {product, b}, {y}, NoAttrs{});
}

// Inputs (dy [N, M], x [N, K]) -> (dw = dy^T x, db = the sums of dy over N).
void linear_weight_grad(const KernelArgs& k) {
  run_kernel(matmul, {k.in[0], k.in[1]}, {k.out[0]}, MatmulAttrs{true, false});
  run_kernel(sum, {k.in[0]}, {k.out[1]}, ReduceAttrs{{0}, false});
}

}  // namespace qkv::kernels::cpu
