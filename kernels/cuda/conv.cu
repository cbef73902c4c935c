// 2-D convolution on CUDA (conv2d, conv2d_backward) with the semantics of kernels/cpu/conv.cpp:
// im2col kernel + cuBLASLt GEMM (the matmul kernel of matmul.cpp), and a col2im kernel for dx.
//
// Images are processed in chunks of at most kMaxChunkImages images whose column matrices fit in
// kMaxColumnBytes (one image per chunk when a single image needs more), so the column buffer
// stays bounded. A column matrix has K = C kh kw rows (row (c, i, j): channel c under kernel tap
// (i, j)) and P = Ho Wo columns (one per output position, 0 where the tap reads padding).
//   forward:  columns laid out [nb, K, P]; y[n0 .. n0 + nb) = W [O, K] x cols, one batched GEMM
//             writing straight into y; the bias is added by a last elementwise kernel.
//   backward: columns laid out [K, nb P] (the chunk's images side by side) and the grad copied to
//             [O, nb P], so dW = g cols^T is a single GEMM that folds the chunk's images into its
//             reduction dimension; each later chunk's dW goes to a scratch [O, K] that is then
//             added into dW, in chunk order. dcols = W^T g reuses the column buffer (kernels on
//             one stream run in order) and col2im gathers it into dx. dbias is a block-per-
//             channel reduction in double.
// Every kernel is a grid-stride loop over its elements (kThreads threads per block) except the
// dbias reduction (one kThreads block per channel, a fixed-order block reduction). Everything
// is deterministic: no atomics, every element written by exactly one thread with a fixed order
// of additions.
#include <algorithm>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/launch.cuh"
#include "tensor/view.h"

namespace qkv::kernels::cuda {
namespace {

// Bounds on one chunk's column buffer. The image cap also keeps the multi-chunk path reachable
// by small test inputs (tests/ops/cases_conv.cpp: more than 32 images need two chunks).
constexpr int64_t kMaxColumnBytes = int64_t(64) << 20;
constexpr int64_t kMaxChunkImages = 32;

struct Geom {
  int64_t N, C, H, W, O, kh, kw, Ho, Wo, sh, sw, ph, pw;
  int64_t K() const { return C * kh * kw; }
  int64_t P() const { return Ho * Wo; }
};

Geom geometry(const Tensor& x, const Tensor& w, const Shape& y, const Conv2dAttrs& a) {
  return {x.size(0), x.size(1), x.size(2),   x.size(3),   w.size(0),    w.size(2),   w.size(3),
          y[2],      y[3],      a.stride[0], a.stride[1], a.padding[0], a.padding[1]};
}

// Images per chunk: at least 1, at most N, kMaxChunkImages and what fits in kMaxColumnBytes.
int64_t chunk_images(const Geom& g, size_t elem_size) {
  const int64_t per_image = std::max<int64_t>(g.K() * g.P(), 1) * int64_t(elem_size);
  const int64_t fit = std::max<int64_t>(kMaxColumnBytes / per_image, 1);
  return std::max<int64_t>(1, std::min({fit, kMaxChunkImages, g.N}));
}

// A contiguous view of `shape` starting `start` elements into t's (contiguous) data.
Tensor dense(const Tensor& t, const Shape& shape, int64_t start) {
  return raw::as_strided(t, shape, contiguous_strides(shape), t.offset() + start);
}

// out[0] = op(in[0]) x op(in[1]) through the cuBLASLt kernel; out[0] must be contiguous.
void gemm(const Tensor& a, const Tensor& b, const Tensor& out, bool trans_a, bool trans_b) {
  const Tensor in[2] = {a, b};
  Tensor res[1] = {out};
  const Attrs attrs = MatmulAttrs{trans_a, trans_b};
  matmul(KernelArgs{in, res, attrs});
}

// x's element strides (x may be any strided view).
struct XStrides {
  int64_t n, c, h, w;
};
XStrides strides_of(const Tensor& x) { return {x.stride(0), x.stride(1), x.stride(2), x.stride(3)}; }

// cols[b bs + r ld + p] for b < nb, r < K, p < P: image n0 + b under row r's tap at output p.
template <class T> struct Im2col {
  const T* x;
  XStrides xs;
  Geom g;
  int64_t n0, nb, bs, ld;
  T* cols;
  __device__ void operator()(int64_t e) const {
    const int64_t K = g.C * g.kh * g.kw, P = g.Ho * g.Wo;
    const int64_t p = e % P, r = e / P % K, b = e / P / K;
    const int64_t oh = p / g.Wo, ow = p % g.Wo;
    const int64_t c = r / (g.kh * g.kw), i = r / g.kw % g.kh, j = r % g.kw;
    const int64_t ih = oh * g.sh - g.ph + i, iw = ow * g.sw - g.pw + j;
    T v = T(0);
    if (ih >= 0 && ih < g.H && iw >= 0 && iw < g.W) v = x[(n0 + b) * xs.n + c * xs.c + ih * xs.h + iw * xs.w];
    cols[b * bs + r * ld + p] = v;
  }
};

// im2col's adjoint as a gather: dx element e of the chunk (image b, channel c, row h, column w)
// is the sum, over taps (i, j) in row-major order, of the dcols entry that read it (at most one
// per tap: output (oh, ow) with oh sh - ph + i = h and ow sw - pw + j = w). dx is written, not
// accumulated, so it needs no zeroing.
template <class T> struct Col2im {
  const T* dcols;
  Geom g;
  int64_t nb, bs, ld;
  T* dx;  // the chunk's first image
  __device__ void operator()(int64_t e) const {
    const int64_t w = e % g.W, h = e / g.W % g.H, c = e / (g.W * g.H) % g.C, b = e / (g.W * g.H * g.C);
    const T* src = dcols + b * bs;
    T s = T(0);
    for (int64_t i = 0; i < g.kh; ++i) {
      const int64_t th = h + g.ph - i;  // oh * sh; decreases with i
      if (th < 0) break;
      if (th % g.sh != 0 || th / g.sh >= g.Ho) continue;
      const int64_t oh = th / g.sh;
      for (int64_t j = 0; j < g.kw; ++j) {
        const int64_t tw = w + g.pw - j;
        if (tw < 0) break;
        if (tw % g.sw != 0 || tw / g.sw >= g.Wo) continue;
        const int64_t r = (c * g.kh + i) * g.kw + j;
        s += src[r * ld + oh * g.Wo + tw / g.sw];
      }
    }
    dx[e] = s;
  }
};

// gc[o, b, p] = grad[n0 + b, o, p]: the chunk's grad as [O, nb P].
template <class T> struct GradToRows {
  const T* g;
  int64_t n0, nb, O, P;
  T* gc;
  __device__ void operator()(int64_t e) const {
    const int64_t p = e % P, b = e / P % nb, o = e / P / nb;
    gc[e] = g[((n0 + b) * O + o) * P + p];
  }
};

// y[n, o, p] += bias[o].
template <class T> struct AddBias {
  T* y;
  const T* bias;
  int64_t O, P;
  __device__ void operator()(int64_t e) const { y[e] += bias[e / P % O]; }
};

template <class T> struct AddInto {
  T* dst;
  const T* src;
  __device__ void operator()(int64_t e) const { dst[e] += src[e]; }
};

// db[o] = sum over n < N, p < P of g[n, o, p], in double; one block per channel, the block's
// threads striding over (n, p) and combined by the fixed-order block reduction. The channel
// loop depends only on blockIdx, so every thread of a block reaches the same barriers.
template <class T> __global__ void channel_sum_kernel(const T* g, T* db, int64_t N, int64_t O, int64_t P) {
  QKV_SHARED(double, smem, [kWarp]);
  for (int64_t o = blockIdx.x; o < O; o += gridDim.x) {
    double s = 0;
    for (int64_t e = threadIdx.x; e < N * P; e += blockDim.x) s += double(g[(e / P * O + o) * P + e % P]);
    s = block_reduce(s, SumOp{}, smem);
    if (threadIdx.x == 0) db[o] = T(s);
  }
}

template <class T>
void conv_forward(const Tensor& x, const Tensor& wm, const Tensor& bias, const Tensor& y, const Geom& g) {
  const int64_t K = g.K(), P = g.P(), O = g.O;
  if (K == 0) {
    raw::fill(y, 0.0);  // no input channels: y = bias (added below)
  } else {
    const int64_t nb_max = chunk_images(g, sizeof(T));
    const Tensor cols = empty({nb_max * K * P}, {y.dtype(), y.device()});
    for (int64_t n0 = 0; n0 < g.N; n0 += nb_max) {
      const int64_t nb = std::min(nb_max, g.N - n0);
      launch_flat(nb * K * P, Im2col<T>{x.data<T>(), strides_of(x), g, n0, nb, K * P, P, cols.data<T>()});
      // [O, K] (broadcast over the batch) x [nb, K, P] -> y[n0 .. n0 + nb) as [nb, O, P].
      gemm(wm, dense(cols, {nb, K, P}, 0), dense(y, {nb, O, P}, n0 * O * P), false, false);
    }
  }
  if (bias.defined()) launch_flat(y.numel(), AddBias<T>{y.data<T>(), bias.data<T>(), O, P});
}

template <class T>
void conv_backward(const Tensor& grad, const Tensor& x, const Tensor& wm, const Tensor& dx, const Tensor& dw,
                   const Tensor& db, const Geom& g) {
  const int64_t K = g.K(), P = g.P(), O = g.O;
  if (O > 0) {
    QKV_LAUNCH(row_blocks(O), kThreads, 0, launch_stream(), channel_sum_kernel<T>)
    (grad.data<T>(), db.data<T>(), g.N, O, P);
    QKV_CUDA_LAUNCH_CHECK();
  }
  if (g.N == 0 || K == 0 || O == 0) {  // sums over nothing
    if (dx.numel() > 0) raw::fill(dx, 0.0);
    if (dw.numel() > 0) raw::fill(dw, 0.0);
    return;
  }
  const int64_t nb_max = chunk_images(g, sizeof(T));
  const TensorOptions opts{dx.dtype(), dx.device()};
  const Tensor cols = empty({K * nb_max * P}, opts), gc = empty({O * nb_max * P}, opts);
  const Tensor dw_chunk = g.N > nb_max ? empty({O, K}, opts) : Tensor();
  const Tensor dwm = dense(dw, {O, K}, 0);
  const int64_t plane = g.C * g.H * g.W;
  for (int64_t n0 = 0; n0 < g.N; n0 += nb_max) {
    const int64_t nb = std::min(nb_max, g.N - n0), L = nb * P;
    const Tensor cols_m = dense(cols, {K, L}, 0), gc_m = dense(gc, {O, L}, 0);
    launch_flat(K * L, Im2col<T>{x.data<T>(), strides_of(x), g, n0, nb, P, L, cols.data<T>()});
    launch_flat(O * L, GradToRows<T>{grad.data<T>(), n0, nb, O, P, gc.data<T>()});
    // dW (+)= [O, L] x [K, L]^T; chunks after the first go through dw_chunk, added in order.
    if (n0 == 0) {
      gemm(gc_m, cols_m, dwm, false, true);
    } else {
      gemm(gc_m, cols_m, dw_chunk, false, true);
      launch_flat(O * K, AddInto<T>{dw.data<T>(), dw_chunk.data<T>()});
    }
    // dcols = [O, K]^T x [O, L] -> [K, L], over the columns (read by the GEMM above).
    gemm(wm, gc_m, cols_m, true, false);
    launch_flat(nb * plane, Col2im<T>{cols.data<T>(), g, nb, P, L, dx.data<T>() + n0 * plane});
  }
}

}  // namespace

// Inputs (x [N, C, H, W], weight [O, C, kh, kw], bias? [O]) -> y [N, O, Ho, Wo].
void conv2d(const KernelArgs& k) {
  const Tensor& y = k.out[0];
  if (y.numel() == 0) return;
  const Tensor& x = k.in[0];  // read through its strides by im2col
  const Tensor w = raw::contiguous(k.in[1]);
  const Tensor bias = k.in[2].defined() ? raw::contiguous(k.in[2]) : Tensor();
  const Geom g = geometry(x, w, y.shape(), attr<Conv2dAttrs>(k.attrs, "conv2d"));
  set_device(y);
  visit_float(x.dtype(), "conv2d", [&]<class T>() { conv_forward<T>(x, dense(w, {g.O, g.K()}, 0), bias, y, g); });
}

// Inputs (grad [N, O, Ho, Wo], x, weight) -> (dx, dweight, dbias [O]).
void conv2d_backward(const KernelArgs& k) {
  const Tensor grad = raw::contiguous(k.in[0]), w = raw::contiguous(k.in[2]);
  const Tensor& x = k.in[1];  // read through its strides by im2col
  const Geom g = geometry(x, w, grad.shape(), attr<Conv2dAttrs>(k.attrs, "conv2d_backward"));
  set_device(k.out[0]);
  visit_float(x.dtype(), "conv2d_backward", [&]<class T>() {
    conv_backward<T>(grad, x, dense(w, {g.O, g.K()}, 0), k.out[0], k.out[1], k.out[2], g);
  });
}

}  // namespace qkv::kernels::cuda
