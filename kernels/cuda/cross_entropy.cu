// Fused cross-entropy CUDA kernels, following kernels/cpu/cross_entropy.cpp: the forward runs
// one block per row (log-sum-exp and the row's loss), then, for mean / sum reduction, one
// block adds the row losses in double. The backward is elementwise: softmax - one_hot, scaled.
// Targets are range-checked on the device, where each row reads its own (a bad one is recorded
// for the host to raise at its next synchronisation, tensor/cuda/device_errors.cuh), and the
// rows that are not ignored, the mean's denominator, are counted on the device: the loss
// never waits for the host. bf16/f16 logits are read in place and computed in float32 (no
// float32 copy of the logits); their loss and lse are float32, their gradient bf16/f16.
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/launch.cuh"
#include "tensor/cuda/device_errors.cuh"
#include "tensor/view.h"

namespace qkv::kernels::cuda {
namespace {

using qkv::cuda::DeviceErrorKind;
using qkv::cuda::DeviceErrorRecord;

// Row r: lse[r] = log-sum-exp of the logits; the row's loss goes to loss_t (as T, reduction
// none) or loss_d (as double, to be added up). X is the logits' stored type, T what it computes in.
template <class X, class I, class T = compute_t<X>>
__global__ void cross_entropy_rows_kernel(const X* x, const I* target, T* lse, T* loss_t, double* loss_d, int64_t rows,
                                          int64_t C, int64_t ignore, DeviceErrorRecord* err, const char* op) {
  QKV_SHARED(T, smem, [kWarp]);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const X* xr = x + r * C;
    T m = neg_infinity<T>();
    for (int64_t i = threadIdx.x; i < C; i += blockDim.x) m = MaxOp{}(m, T(xr[i]));
    m = block_reduce(m, MaxOp{}, smem);
    T s = 0;
    for (int64_t i = threadIdx.x; i < C; i += blockDim.x) s += exp_(T(xr[i]) - m);
    s = block_reduce(s, SumOp{}, smem);
    if (threadIdx.x == 0) {
      const T l = m + log_(s);
      const int64_t t = int64_t(target[r]);
      const bool bad = t != ignore && (t < 0 || t >= C);
      if (bad) qkv::cuda::report_device_error(err, DeviceErrorKind::target, op, t, r, C, ignore);
      const double loss = t == ignore || bad ? 0.0 : double(l) - double(T(xr[t]));
      lse[r] = l;
      if (loss_t) loss_t[r] = T(loss);
      else loss_d[r] = loss;
    }
  }
}

// Rows whose target is not ignore_index, as a double (the mean's denominator), one block.
template <class I> __device__ double count_valid(const I* target, int64_t rows, int64_t ignore, double* smem) {
  double c = 0;
  for (int64_t i = threadIdx.x; i < rows; i += blockDim.x) c += int64_t(target[i]) != ignore ? 1.0 : 0.0;
  return block_reduce(c, SumOp{}, smem);
}

// One block: out[0] = T(sum of the row losses / the denominator), the denominator being the
// valid-row count for a mean and 1 for a sum.
template <class T, class I>
__global__ void total_loss_kernel(const double* loss, const I* target, int64_t rows, int64_t ignore, bool mean,
                                  T* out) {
  QKV_SHARED(double, smem, [kWarp]);
  double s = 0;
  for (int64_t i = threadIdx.x; i < rows; i += blockDim.x) s += loss[i];
  s = block_reduce(s, SumOp{}, smem);
  const double denom = mean ? count_valid(target, rows, ignore, smem) : 1.0;
  if (threadIdx.x == 0) out[0] = T(s / denom);
}

// One block: *denom = the valid-row count (the backward of a mean loss).
template <class I> __global__ void denominator_kernel(const I* target, int64_t rows, int64_t ignore, double* denom) {
  QKV_SHARED(double, smem, [kWarp]);
  const double c = count_valid(target, rows, ignore, smem);
  if (threadIdx.x == 0) *denom = c;
}

// dlogits[r, c] = (exp(x - lse[r]) - [c == target[r]]) * scale_r; zero on ignored rows.
template <class X, class I, class T = compute_t<X>> struct CrossEntropyGrad {
  const X* x;
  const I* target;
  const T* lse;
  const T* grad;
  X* dx;
  int64_t C, ignore;
  bool per_row;         // reduction none: one gradient per row, else a scalar
  const double* denom;  // on the device: the valid-row count of a mean; nullptr: 1
  __device__ void operator()(int64_t i) const {
    const int64_t r = i / C, c = i % C, t = int64_t(target[r]);
    if (t == ignore) {
      dx[i] = X(T(0));
      return;
    }
    const T scale = T(double(per_row ? grad[r] : grad[0]) / (denom ? *denom : 1.0));
    T d = exp_(T(x[i]) - lse[r]) * scale;
    if (c == t) d -= scale;
    dx[i] = X(d);
  }
};

}  // namespace

// Inputs (logits [..., C], target [...]) -> outputs (loss, lse [...]).
void cross_entropy(const KernelArgs& k) {
  const auto& a = attr<CrossEntropyAttrs>(k.attrs, "cross_entropy");
  const Tensor logits = raw::contiguous(k.in[0]);
  const Tensor target = raw::contiguous(k.in[1]);
  const int64_t C = logits.shape().back(), rows = C ? logits.numel() / C : 0;
  visit_any_float(logits.dtype(), "cross_entropy", [&]<class X>() {
    using T = compute_t<X>;
    visit_index(target.dtype(), "cross_entropy", [&]<class I>() {
      set_device(logits);
      const bool none = a.reduction == Reduction::none;
      const Tensor loss_d = none ? Tensor() : empty({rows}, {DType::f64, logits.device()});
      if (rows > 0) {
        QKV_LAUNCH(row_blocks(rows), row_threads(C), 0, launch_stream(), cross_entropy_rows_kernel<X, I>)
        (logits.data<X>(), target.data<I>(), k.out[1].data<T>(), none ? k.out[0].data<T>() : nullptr,
         none ? nullptr : loss_d.data<double>(), rows, C, a.ignore_index,
         qkv::cuda::device_error_record(logits.device().index),
         "cross_entropy");  // a host address: only the host reads it
        QKV_CUDA_LAUNCH_CHECK();
      }
      if (none) return;
      QKV_LAUNCH(1, 1024, 0, launch_stream(), total_loss_kernel<T, I>)
      (loss_d.data<double>(), target.data<I>(), rows, a.ignore_index, a.reduction == Reduction::mean,
       k.out[0].data<T>());
      QKV_CUDA_LAUNCH_CHECK();
    });
  });
}

// Inputs (grad_loss, logits, target, lse) -> output dlogits. The forward gives the loss and lse
// in the compute dtype (float32 for 16-bit logits); a grad_loss or lse in the logits' own 16-bit
// dtype is widened first.
void cross_entropy_backward(const KernelArgs& k) {
  const auto& a = attr<CrossEntropyAttrs>(k.attrs, "cross_entropy_backward");
  const Tensor logits = raw::contiguous(k.in[1]);
  const Tensor target = raw::contiguous(k.in[2]);
  const int64_t C = logits.shape().back(), rows = C ? logits.numel() / C : 0;
  visit_any_float(logits.dtype(), "cross_entropy_backward", [&]<class X>() {
    using T = compute_t<X>;
    const DType compute = dtype_of<T>();
    const Tensor g = raw::contiguous(raw::to(k.in[0], compute, logits.device()));
    const Tensor lse = raw::contiguous(raw::to(k.in[3], compute, logits.device()));
    visit_index(target.dtype(), "cross_entropy_backward", [&]<class I>() {
      set_device(logits);
      Tensor denom;
      if (a.reduction == Reduction::mean) {
        denom = empty({}, {DType::f64, logits.device()});
        QKV_LAUNCH(1, 1024, 0, launch_stream(), denominator_kernel<I>)
        (target.data<I>(), rows, a.ignore_index, denom.data<double>());
        QKV_CUDA_LAUNCH_CHECK();
      }
      launch_flat(rows * C,
                  CrossEntropyGrad<X, I>{logits.data<X>(), target.data<I>(), lse.data<T>(), g.data<T>(),
                                         k.out[0].data<X>(), C, a.ignore_index, a.reduction == Reduction::none,
                                         denom.defined() ? denom.data<double>() : nullptr});
    });
  });
}

}  // namespace qkv::kernels::cuda
