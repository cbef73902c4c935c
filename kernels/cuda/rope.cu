// Rotary position embedding on CUDA, as kernels/cpu/rope.cpp (rotate-half pairs, dims past R
// copied): one thread per output element. The start is read on the device, so a CUDA graph of a
// decode step replays at every position; one that does not fit the tables is reported as an
// IndexError at the next synchronisation, as kv_write reports it.
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/launch.cuh"
#include "tensor/cuda/device_errors.cuh"
#include "tensor/view.h"

namespace qkv::kernels::cuda {
namespace {

template <class F> struct Rope {
  F* y;                  // contiguous [B, T, H, D]
  const F* x;            // strided
  const F *cos, *sin;    // contiguous [P, half]
  const int64_t* start;  // one int64, or null for 0
  int64_t T, H, D, half, P;
  int64_t s0, s1, s2, s3;  // x's strides
  F sign;                  // -1: the inverse rotation
  qkv::cuda::DeviceErrorRecord* record;
  __device__ void operator()(int64_t i) const {
    const int64_t s = start ? *start : 0;
    if (s < 0 || s + T > P) {
      if (i == 0) qkv::cuda::report_device_error(record, qkv::cuda::DeviceErrorKind::index, "rope", s, 0, P - T + 1, 0);
      return;
    }
    const int64_t d = i % D, h = (i / D) % H, t = (i / (D * H)) % T, b = i / (D * H * T);
    const F* src = x + b * s0 + t * s1 + h * s2;
    if (d >= 2 * half) {
      y[i] = src[d * s3];
      return;
    }
    const int64_t c = d % half, row = (s + t) * half + c;
    const F co = cos[row], si = sign * sin[row];
    y[i] = d < half ? src[d * s3] * co - src[(d + half) * s3] * si : src[d * s3] * co + src[(d - half) * s3] * si;
  }
};

}  // namespace

// Inputs (x [B, T, H, D] any strides, cos, sin [P, R/2], start? one int64) -> y [B, T, H, D].
void rope(const KernelArgs& k) {
  const bool inverse = attr<RopeAttrs>(k.attrs, "rope").inverse;
  const Tensor& x = k.in[0];
  const int64_t n = x.numel();
  if (n == 0) return;
  set_device(x);
  visit_float(x.dtype(), "rope", [&]<class F>() {
    const Tensor cos_t = raw::contiguous(raw::to(k.in[1], dtype_of<F>(), x.device()));
    const Tensor sin_t = raw::contiguous(raw::to(k.in[2], dtype_of<F>(), x.device()));
    launch_flat(n, Rope<F>{k.out[0].data<F>(), x.data<F>(), cos_t.data<F>(), sin_t.data<F>(),
                           k.in[3].defined() ? k.in[3].data<int64_t>() : nullptr, x.size(1), x.size(2), x.size(3),
                           cos_t.size(1), cos_t.size(0), x.stride(0), x.stride(1), x.stride(2), x.stride(3),
                           inverse ? F(-1) : F(1), qkv::cuda::device_error_record(x.device().index)});
  });
}

}  // namespace qkv::kernels::cuda
