// The SwiGLU gate on CUDA, as kernels/cpu/swiglu.cpp: h [rows, 2F] holds each token's gate (first
// F) and up projection (last F); one thread per output element.
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/launch.cuh"
#include "tensor/view.h"

namespace qkv::kernels::cuda {
namespace {

template <class T> struct Swiglu {
  T* y;
  const T* h;
  int64_t F;
  __device__ void operator()(int64_t i) const {
    const int64_t r = i / F, j = i % F;
    const T a = h[r * 2 * F + j], b = h[r * 2 * F + F + j];
    y[i] = a / (T(1) + exp_(-a)) * b;
  }
};

// d gate = g up sig (1 + a (1 - sig)), d up = g a sig; one thread per element of g.
template <class T> struct SwigluBackward {
  T* dh;
  const T *g, *h;
  int64_t F;
  __device__ void operator()(int64_t i) const {
    const int64_t r = i / F, j = i % F;
    const T a = h[r * 2 * F + j], b = h[r * 2 * F + F + j], sig = T(1) / (T(1) + exp_(-a));
    dh[r * 2 * F + j] = g[i] * b * sig * (T(1) + a * (T(1) - sig));
    dh[r * 2 * F + F + j] = g[i] * a * sig;
  }
};

}  // namespace

// Inputs (h [..., 2F]) -> y [..., F].
void swiglu(const KernelArgs& k) {
  const Tensor h = raw::contiguous(k.in[0]);
  const int64_t n = k.out[0].numel();
  if (n == 0) return;
  set_device(h);
  visit_float(h.dtype(), "swiglu", [&]<class T>() {
    launch_flat(n, Swiglu<T>{k.out[0].data<T>(), h.data<T>(), k.out[0].size(-1)});
  });
}

// Inputs (grad [..., F], h [..., 2F]) -> dh [..., 2F].
void swiglu_backward(const KernelArgs& k) {
  const Tensor g = raw::contiguous(k.in[0]), h = raw::contiguous(k.in[1]);
  const int64_t n = g.numel();
  if (n == 0) return;
  set_device(h);
  visit_float(h.dtype(), "swiglu_backward", [&]<class T>() {
    launch_flat(n, SwigluBackward<T>{k.out[0].data<T>(), g.data<T>(), h.data<T>(), g.size(-1)});
  });
}

}  // namespace qkv::kernels::cuda
