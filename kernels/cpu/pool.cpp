// 2-D pooling on the CPU over the planes of x [N, C, H, W], one plane per OpenMP task:
// max_pool2d (PyTorch's semantics: floor mode, padding never wins, the first maximum of a window
// wins and NaN propagates; indices are h * W + w within the plane) and adaptive_avg_pool2d
// (output cell i averages input rows floor(i H / oh) to ceil((i + 1) H / oh), likewise columns).
#include <cmath>
#include <limits>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/loops.h"
#include "tensor/view.h"

namespace qkv::kernels::cpu {
namespace {

struct Plane {
  int64_t H, W, Ho, Wo;
};

Plane plane_of(const Tensor& x, const Tensor& y) { return {x.size(2), x.size(3), y.size(2), y.size(3)}; }

// The window [begin, end) of output `o` along one axis, clipped to the input [0, n).
struct Range {
  int64_t begin, end;
};
Range max_window(int64_t o, int64_t kernel, int64_t stride, int64_t pad, int64_t n) {
  const int64_t start = o * stride - pad;
  return {std::max<int64_t>(start, 0), std::min(start + kernel, n)};
}
Range adaptive_bin(int64_t o, int64_t out, int64_t n) { return {o * n / out, ((o + 1) * n + out - 1) / out}; }

template <class T> void max_pool_plane(const T* x, const Plane& p, const Pool2dAttrs& a, T* y, int64_t* idx) {
  for (int64_t oh = 0; oh < p.Ho; ++oh) {
    const Range rh = max_window(oh, a.kernel[0], a.stride[0], a.padding[0], p.H);
    for (int64_t ow = 0; ow < p.Wo; ++ow) {
      const Range rw = max_window(ow, a.kernel[1], a.stride[1], a.padding[1], p.W);
      T best = -std::numeric_limits<T>::infinity();
      int64_t arg = rh.begin * p.W + rw.begin;
      for (int64_t h = rh.begin; h < rh.end; ++h)
        for (int64_t w = rw.begin; w < rw.end; ++w) {
          const T v = x[h * p.W + w];
          if (v > best || std::isnan(v)) {
            best = v;
            arg = h * p.W + w;
          }
        }
      y[oh * p.Wo + ow] = best;
      idx[oh * p.Wo + ow] = arg;
    }
  }
}

template <class T> void adaptive_avg_plane(const T* x, const Plane& p, T* y) {
  for (int64_t oh = 0; oh < p.Ho; ++oh) {
    const Range rh = adaptive_bin(oh, p.Ho, p.H);
    for (int64_t ow = 0; ow < p.Wo; ++ow) {
      const Range rw = adaptive_bin(ow, p.Wo, p.W);
      double s = 0;
      for (int64_t h = rh.begin; h < rh.end; ++h)
        s += ConstArrMap<T>(x + h * p.W + rw.begin, rw.end - rw.begin).template cast<double>().sum();
      y[oh * p.Wo + ow] = T(s / double((rh.end - rh.begin) * (rw.end - rw.begin)));
    }
  }
}

// Calls f(i) for every plane i of x, on threads when there is enough work.
template <class F> void for_each_plane(const Tensor& x, F&& f) {
  const int64_t planes = x.size(0) * x.size(1);
#pragma omp parallel for schedule(static) if (x.numel() >= kParallelGrain)
  for (int64_t i = 0; i < planes; ++i) f(i);
}

}  // namespace

// Input x [N, C, H, W] -> (values [N, C, Ho, Wo], int64 indices).
void max_pool2d(const KernelArgs& k) {
  const auto& a = attr<Pool2dAttrs>(k.attrs, "max_pool2d");
  const Tensor x = raw::contiguous(k.in[0]);
  const Plane p = plane_of(x, k.out[0]);
  visit_float(x.dtype(), "max_pool2d", [&]<class T>() {
    const T* xp = x.data<T>();
    T* y = k.out[0].data<T>();
    int64_t* idx = k.out[1].data<int64_t>();
    for_each_plane(x, [&](int64_t i) {
      max_pool_plane(xp + i * p.H * p.W, p, a, y + i * p.Ho * p.Wo, idx + i * p.Ho * p.Wo);
    });
  });
}

// Input x [N, C, H, W] -> [N, C, oh, ow].
void adaptive_avg_pool2d(const KernelArgs& k) {
  const Tensor x = raw::contiguous(k.in[0]);
  const Plane p = plane_of(x, k.out[0]);
  visit_float(x.dtype(), "adaptive_avg_pool2d", [&]<class T>() {
    const T* xp = x.data<T>();
    T* y = k.out[0].data<T>();
    for_each_plane(x, [&](int64_t i) { adaptive_avg_plane(xp + i * p.H * p.W, p, y + i * p.Ho * p.Wo); });
  });
}

}  // namespace qkv::kernels::cpu
