// Inference batch norm on CUDA, as kernels/cpu/batch_norm.cpp: y = x * scale[c] + shift[c] over
// dim 1 of x [N, C, ...], with scale = w / sqrt(running_var + eps) and shift = b - mean * scale.
// A first grid-stride kernel (one thread per channel) computes scale and shift in double from
// the device tensors and casts them to T into a [2, C] scratch tensor, as the CPU does on the
// host; a second, elementwise strided kernel (launch_strided: kThreads per block, one thread
// per element) reads x through its strides and writes the contiguous y. No reductions, so the
// result is deterministic.
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/launch.cuh"
#include "tensor/view.h"

namespace qkv::kernels::cuda {
namespace {

template <class T> const T* ptr_or_null(const Tensor& t) { return t.defined() ? t.data<T>() : nullptr; }

// Per channel c: the statistics and affine parameters (defaults where a vector is left out:
// mean 0, var 1, weight 1, bias 0) folded into scale[c] and shift[c].
template <class T> struct ChannelAffine {
  const T *mean, *var, *weight, *bias;
  double eps;
  T *scale, *shift;
  __device__ void operator()(int64_t c) const {
    const double m = mean ? double(mean[c]) : 0.0, v = var ? double(var[c]) : 1.0;
    const double w = weight ? double(weight[c]) : 1.0, b = bias ? double(bias[c]) : 0.0;
    const double s = w / ::sqrt(v + eps);
    scale[c] = T(s);
    shift[c] = T(b - m * s);
  }
};

// off[0]: y's offset, off[1]: x's; i the logical element index, whose channel is i / inner % C.
template <class T> struct Normalize {
  T* y;
  const T* x;
  const T *scale, *shift;
  int64_t C, inner;
  __device__ void operator()(const int64_t (&off)[2], int64_t i) const {
    const int64_t c = i / inner % C;
    y[off[0]] = x[off[1]] * scale[c] + shift[c];
  }
};

}  // namespace

// Inputs (x, running_mean, running_var, weight?, bias?) -> y.
void batch_norm(const KernelArgs& k) {
  const double eps = attr<BatchNormAttrs>(k.attrs, "batch_norm").eps;
  const Tensor& x = k.in[0];
  const Tensor& y = k.out[0];
  if (y.numel() == 0) return;
  const int64_t C = x.size(1), inner = x.numel() / (x.size(0) * C);
  Tensor vec[4];  // running_mean, running_var, weight, bias: contiguous [C] or undefined
  for (int i = 0; i < 4; ++i)
    if (k.in[size_t(i) + 1].defined()) vec[i] = raw::contiguous(k.in[size_t(i) + 1]);
  set_device(y);
  visit_float(x.dtype(), "batch_norm", [&]<class T>() {
    const Tensor params = empty({2, C}, {x.dtype(), y.device()});
    T* scale = params.data<T>();
    T* shift = scale + C;
    launch_flat(C, ChannelAffine<T>{ptr_or_null<T>(vec[0]), ptr_or_null<T>(vec[1]), ptr_or_null<T>(vec[2]),
                                    ptr_or_null<T>(vec[3]), eps, scale, shift});
    launch_strided<2>(x.shape(), {y.strides(), x.strides()},
                      Normalize<T>{y.data<T>(), x.data<T>(), scale, shift, C, inner});
  });
}

}  // namespace qkv::kernels::cuda
