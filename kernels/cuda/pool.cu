// 2-D pooling on CUDA over the planes of x [N, C, H, W], as kernels/cpu/pool.cpp:
// max_pool2d (PyTorch's semantics: floor mode, padding never wins, the first maximum of a window
// wins and NaN propagates; indices are h * W + w within the plane) and adaptive_avg_pool2d
// (output cell i averages input rows floor(i H / oh) to ceil((i + 1) H / oh), likewise columns,
// summing in double). One thread per output element in a grid-stride loop (launch_flat:
// kThreads per block), reading x through its strides and walking its window in the CPU's order,
// so results match the CPU's exactly and are deterministic; no shared memory.
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/launch.cuh"

namespace qkv::kernels::cuda {
namespace {

// Where output element e of [N, C, Ho, Wo] is, and the start of its input plane.
struct PoolGeom {
  int64_t C, H, W, Ho, Wo;
  int64_t sn, sc, sh, sw;  // x's element strides
};

struct Cell {
  int64_t plane_offset, oh, ow;
};

__device__ __forceinline__ Cell cell_of(const PoolGeom& p, int64_t e) {
  const int64_t ow = e % p.Wo, oh = e / p.Wo % p.Ho, c = e / (p.Wo * p.Ho) % p.C, n = e / (p.Wo * p.Ho * p.C);
  return {n * p.sn + c * p.sc, oh, ow};
}

template <class T> struct MaxPool {
  const T* x;
  PoolGeom p;
  int64_t kh, kw, sth, stw, ph, pw;  // kernel, stride, padding
  T* y;
  int64_t* idx;
  __device__ void operator()(int64_t e) const {
    const Cell q = cell_of(p, e);
    // The window clipped to the plane: [h0, h1) x [w0, w1).
    const int64_t hs = q.oh * sth - ph, ws = q.ow * stw - pw;
    const int64_t h0 = hs > 0 ? hs : 0, h1 = hs + kh < p.H ? hs + kh : p.H;
    const int64_t w0 = ws > 0 ? ws : 0, w1 = ws + kw < p.W ? ws + kw : p.W;
    const T* plane = x + q.plane_offset;
    T best = neg_infinity<T>();
    int64_t arg = h0 * p.W + w0;
    for (int64_t h = h0; h < h1; ++h)
      for (int64_t w = w0; w < w1; ++w) {
        const T v = plane[h * p.sh + w * p.sw];
        if (v > best || v != v) {  // v != v: NaN, which then stays (only a later NaN replaces it)
          best = v;
          arg = h * p.W + w;
        }
      }
    y[e] = best;
    idx[e] = arg;
  }
};

template <class T> struct AdaptiveAvg {
  const T* x;
  PoolGeom p;
  T* y;
  __device__ void operator()(int64_t e) const {
    const Cell q = cell_of(p, e);
    const int64_t h0 = q.oh * p.H / p.Ho, h1 = ((q.oh + 1) * p.H + p.Ho - 1) / p.Ho;
    const int64_t w0 = q.ow * p.W / p.Wo, w1 = ((q.ow + 1) * p.W + p.Wo - 1) / p.Wo;
    const T* plane = x + q.plane_offset;
    double s = 0;
    for (int64_t h = h0; h < h1; ++h)
      for (int64_t w = w0; w < w1; ++w) s += double(plane[h * p.sh + w * p.sw]);
    y[e] = T(s / double((h1 - h0) * (w1 - w0)));
  }
};

PoolGeom pool_geom(const Tensor& x, const Tensor& y) {
  return {x.size(1), x.size(2), x.size(3), y.size(2), y.size(3), x.stride(0), x.stride(1), x.stride(2), x.stride(3)};
}

}  // namespace

// Input x [N, C, H, W] -> (values [N, C, Ho, Wo], int64 indices).
void max_pool2d(const KernelArgs& k) {
  const auto& a = attr<Pool2dAttrs>(k.attrs, "max_pool2d");
  const Tensor& x = k.in[0];
  const Tensor &y = k.out[0], &idx = k.out[1];
  if (y.numel() == 0) return;
  set_device(y);
  visit_float(x.dtype(), "max_pool2d", [&]<class T>() {
    launch_flat(y.numel(), MaxPool<T>{x.data<T>(), pool_geom(x, y), a.kernel[0], a.kernel[1], a.stride[0], a.stride[1],
                                      a.padding[0], a.padding[1], y.data<T>(), idx.data<int64_t>()});
  });
}

// Input x [N, C, H, W] -> [N, C, oh, ow].
void adaptive_avg_pool2d(const KernelArgs& k) {
  const Tensor& x = k.in[0];
  const Tensor& y = k.out[0];
  if (y.numel() == 0) return;
  set_device(y);
  visit_float(x.dtype(), "adaptive_avg_pool2d", [&]<class T>() {
    launch_flat(y.numel(), AdaptiveAvg<T>{x.data<T>(), pool_geom(x, y), y.data<T>()});
  });
}

}  // namespace qkv::kernels::cuda
