// The linear layer on CUDA, each kernel one cuBLASLt GEMM whose epilogue does the rest
// (kernels/cuda/gemm.h): linear y = x w^T + b (epilogue BIAS: the bias added as the tile is
// written, no second pass over y) and linear_weight_grad dw = dy^T x with db = the column sums
// of dy (BGRADB: summed while the GEMM reads dy, no second read of it). Where cuBLASLt has no
// algorithm for the epilogue (float64, sizes or views its epilogues do not take) the plain
// GEMM runs, then bias_kernel, or the column sum of kernels/cuda/reduce.cu.
//
// The models' GELU stays a separate kernel: it is the exact (erf) form, as nanoGPT's and
// torch.nn.GELU's default, and cuBLASLt's GELU epilogues compute the tanh form.
#include <cstdint>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/launch.cuh"
#include "tensor/view.h"

namespace qkv::kernels::cuda {
namespace {

// y[i] += bias[i % cols], in the compute type of X.
template <class X> __global__ void bias_kernel(X* y, const X* bias, int64_t n, int64_t cols) {
  using T = compute_t<X>;
  for (int64_t i = global_thread(); i < n; i += grid_threads()) y[i] = X(T(y[i]) + T(bias[i % cols]));
}

// cuBLASLt's epilogues read and write contiguous, 16-byte aligned vectors.
bool epilogue_ready(const Tensor& t) {
  return t.is_contiguous() && reinterpret_cast<uintptr_t>(t.raw_data()) % 16 == 0 && t.dtype() != DType::f64;
}

}  // namespace

// Inputs (x [..., K], w [M, K], b? [M]) -> y [..., M], computed as x [N, K] -> y [N, M].
void linear(const KernelArgs& k) {
  const Tensor x = raw::as_matrix(k.in[0]), y = raw::as_matrix(k.out[0]);  // y: a view of the output
  const Tensor &w = k.in[1], &b = k.in[2];
  if (y.numel() == 0) return;
  set_device(y);
  if (x.size(1) == 0) {                // the sum of nothing: the bias, or zeros
    if (b.defined()) raw::copy(y, b);  // b broadcast over the rows
    else raw::fill(y, 0.0);
    return;
  }
  if (!b.defined()) {
    run_gemm(x, w, y, false, true, GemmEpilogue{});
    return;
  }
  if (epilogue_ready(b) && epilogue_ready(y) &&
      run_gemm(x, w, y, false, true, {GemmEpilogue::Kind::bias, b.raw_data()}))
    return;
  run_gemm(x, w, y, false, true, GemmEpilogue{});
  const Tensor bias = raw::contiguous(b);
  visit_any_float(y.dtype(), "linear", [&]<class X>() {
    QKV_LAUNCH(blocks_for(y.numel(), kThreads), kThreads, 0, launch_stream(), bias_kernel<X>)
    (static_cast<X*>(y.raw_data()), static_cast<const X*>(bias.raw_data()), y.numel(), y.size(1));
    QKV_CUDA_LAUNCH_CHECK();
  });
}

// Inputs (dy [N, M], x [N, K]) -> (dw = dy^T x [M, K], db = the sums of dy over N [M]).
void linear_weight_grad(const KernelArgs& k) {
  const Tensor &dy = k.in[0], &x = k.in[1], &dw = k.out[0], &db = k.out[1];
  if (dw.numel() == 0 && db.numel() == 0) return;
  set_device(db.numel() ? db : dw);
  if (dy.size(0) == 0) {  // no rows: both gradients are zero
    raw::fill(dw, 0.0);
    raw::fill(db, 0.0);
    return;
  }
  if (dw.numel() > 0 && epilogue_ready(db) &&
      run_gemm(dy, x, dw, /*trans_a=*/true, false, {GemmEpilogue::Kind::bias_grad_b, db.raw_data()}))
    return;
  if (dw.numel() > 0) run_gemm(dy, x, dw, true, false, GemmEpilogue{});
  // The column sums through the reduction kernels, in float32 for 16-bit gradients (as the
  // dispatcher widens them for sum).
  const bool low = dy.dtype() == DType::bf16 || dy.dtype() == DType::f16;
  const Tensor in[] = {low ? raw::to(dy, DType::f32, dy.device()) : dy};
  Tensor out[] = {low ? empty(db.shape(), {DType::f32, db.device()}) : db};
  sum(KernelArgs{in, out, ReduceAttrs{{0}, false}});
  if (low) raw::copy(db, out[0]);
}

}  // namespace qkv::kernels::cuda
