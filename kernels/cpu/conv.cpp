// 2-D convolution on the CPU (conv2d, conv2d_backward): im2col + Eigen GEMM.
//
// An image x [C, H, W] is lowered to its column matrix [K, P] (K = C kh kw, P = Ho Wo; row
// (c, i, j) holds the input under kernel tap (i, j) of channel c for every output position, 0 in
// the padding), and the output is W [O, K] times it. Several images share one GEMM when P is
// small (deep layers of small images), so the weight is read once per group instead of once per
// image. Groups run on OpenMP threads with single-threaded GEMMs; with fewer groups than threads
// they run one after another and Eigen threads each GEMM. A pointwise convolution (1x1, stride
// 1, no padding) uses the image itself as its column matrix.
//
// Lowering cost matters next to the GEMM (each column entry feeds only O multiply-adds): the
// valid output range of every kernel tap is computed once per call, column buffers come from the
// caching allocator and are zeroed once per call, and only the taps that land inside the image
// are copied (for stride 1 "same" convolutions, one contiguous run per row of the matrix).
// Kernel taps that see only padding for every output (a 3x3 pad-1 convolution of a 1x1 input
// has 8) are dropped from the forward GEMM together with their weight columns.
//
// The backward lowers the same way: dweight = sum over images of g cols^T, dbias = the sum of g
// over images and positions, and dx = col2im(W^T g), col2im being im2col's adjoint (it adds each
// column entry back onto the input element it was read from).
#include <Eigen/Core>
#include <algorithm>
#include <omp.h>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/loops.h"
#include "tensor/view.h"

namespace qkv::kernels::cpu {
namespace {

template <class T> using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T> using MatMap = Eigen::Map<Mat<T>>;
template <class T> using ConstMatMap = Eigen::Map<const Mat<T>>;
template <class T> using ColVec = Eigen::Matrix<T, Eigen::Dynamic, 1>;

// Column matrices of one GEMM hold at most this many elements (bounds the per-thread buffer).
constexpr int64_t kMaxColumnElements = int64_t(1) << 22;
// Images are grouped until a GEMM has about this many columns.
constexpr int64_t kTargetColumns = 256;

// Output indices [lo, hi) along one axis whose input index o * stride - pad + tap is inside.
struct Span {
  int64_t lo, hi;
};
Span valid_outputs(int64_t tap, int64_t pad, int64_t stride, int64_t n, int64_t out) {
  const int64_t lo = std::min(out, pad > tap ? (pad - tap + stride - 1) / stride : 0);
  const int64_t last = n - 1 + pad - tap;  // o * stride <= last
  const int64_t hi = last < 0 ? lo : std::clamp(last / stride + 1, lo, out);
  return {lo, hi};
}

// A kernel tap (i, j) and the output rows and columns where it reads inside the image.
struct Tap {
  int64_t i, j;
  Span rows, cols;
};

struct ConvGeom {
  int64_t N, C, H, W, O, kh, kw, Ho, Wo, sh, sw, ph, pw;
  std::vector<Tap> taps;  // the taps lowered into the column matrix, row (c, t) = c T + t
  int64_t K() const { return C * int64_t(taps.size()); }
  bool all_taps() const { return int64_t(taps.size()) == kh * kw; }
  int64_t P() const { return Ho * Wo; }
  int64_t plane() const { return C * H * W; }
  bool padded() const { return ph > 0 || pw > 0; }
  bool pointwise() const { return kh == 1 && kw == 1 && sh == 1 && sw == 1 && ph == 0 && pw == 0; }
  bool same_width() const { return sh == 1 && sw == 1 && Wo == W; }
};

// With live_only, taps that read only padding for every output are left out (their rows of the
// column matrix would be zero): a 3x3 pad-1 convolution of a 1x1 input keeps its centre tap.
ConvGeom geometry(const Tensor& x, const Tensor& w, const Shape& y, const Conv2dAttrs& a, bool live_only) {
  ConvGeom g{x.size(0), x.size(1), x.size(2),   x.size(3),   w.size(0),    w.size(2),    w.size(3),
             y[2],      y[3],      a.stride[0], a.stride[1], a.padding[0], a.padding[1], {}};
  for (int64_t i = 0; i < g.kh; ++i)
    for (int64_t j = 0; j < g.kw; ++j) {
      const Tap t{i, j, valid_outputs(i, g.ph, g.sh, g.H, g.Ho), valid_outputs(j, g.pw, g.sw, g.W, g.Wo)};
      if (!live_only || (t.rows.hi > t.rows.lo && t.cols.hi > t.cols.lo)) g.taps.push_back(t);
    }
  return g;
}

// Row (c, t) of the column matrix: plane [H, W] under kernel tap t. Padded entries are not
// written (the buffer arrives zeroed and they are the same for every image).
template <class T> void im2col_row(const T* plane, const ConvGeom& g, const Tap& t, T* row) {
  const Span rows = t.rows, cols = t.cols;
  const int64_t n = cols.hi - cols.lo;
  if (n <= 0 || rows.hi <= rows.lo) return;
  const T* src = plane + (t.i - g.ph) * g.W + (t.j - g.pw);  // src[oh sh W + ow sw]: input under (oh, ow)
  if (g.same_width()) {
    // Entry oh W + ow reads src[oh W + ow]: the valid block is one run; the entries it fills at
    // row ends from the neighbouring rows are set back to zero.
    const int64_t first = rows.lo * g.W + cols.lo, last = (rows.hi - 1) * g.W + cols.hi;
    ArrMap<T>(row + first, last - first) = ConstArrMap<T>(src + first, last - first);
    for (int64_t oh = rows.lo; oh < rows.hi; ++oh) {
      for (int64_t ow = 0; ow < cols.lo; ++ow) row[oh * g.W + ow] = T(0);
      for (int64_t ow = cols.hi; ow < g.W; ++ow) row[oh * g.W + ow] = T(0);
    }
    return;
  }
  for (int64_t oh = rows.lo; oh < rows.hi; ++oh) {
    const T* s = src + oh * g.sh * g.W + cols.lo * g.sw;
    ArrMap<T> dst(row + oh * g.Wo + cols.lo, n);
    if (g.sw == 1) dst = ConstArrMap<T>(s, n);
    else dst = StridedArrMap<T>(s, n, Eigen::InnerStride<>(g.sw));
  }
}

// The adjoint of im2col_row: adds the row's valid entries back onto the plane.
template <class T> void col2im_row(const T* row, const ConvGeom& g, const Tap& t, T* plane) {
  const Span rows = t.rows, cols = t.cols;
  const int64_t n = cols.hi - cols.lo;
  if (n <= 0) return;
  T* dst = plane + (t.i - g.ph) * g.W + (t.j - g.pw);
  for (int64_t oh = rows.lo; oh < rows.hi; ++oh) {
    T* d = dst + oh * g.sh * g.W + cols.lo * g.sw;
    const ConstArrMap<T> src(row + oh * g.Wo + cols.lo, n);
    if (g.sw == 1) ArrMap<T>(d, n) += src;
    else Eigen::Map<Arr<T>, 0, Eigen::InnerStride<>>(d, n, Eigen::InnerStride<>(g.sw)) += src;
  }
}

// Image x [C, H, W] into columns [col0, col0 + P) of cols [K, ld].
template <class T> void im2col(const T* x, const ConvGeom& g, T* cols, int64_t ld, int64_t col0) {
  const int64_t nt = int64_t(g.taps.size());
  for (int64_t c = 0; c < g.C; ++c)
    for (int64_t t = 0; t < nt; ++t)
      im2col_row(x + c * g.H * g.W, g, g.taps[size_t(t)], cols + (c * nt + t) * ld + col0);
}

// dx [C, H, W] += col2im(cols [K, P]).
template <class T> void col2im(const T* cols, const ConvGeom& g, T* dx) {
  const int64_t nt = int64_t(g.taps.size());
  for (int64_t c = 0; c < g.C; ++c)
    for (int64_t t = 0; t < nt; ++t) col2im_row(cols + (c * nt + t) * g.P(), g, g.taps[size_t(t)], dx + c * g.H * g.W);
}

// Images per GEMM: enough for ~kTargetColumns columns, at most an equal share of the batch per
// thread, and within the column buffer bound.
int64_t group_size(const ConvGeom& g, int threads) {
  const int64_t P = std::max<int64_t>(g.P(), 1), K = std::max<int64_t>(g.K(), 1);
  int64_t group = (kTargetColumns + P - 1) / P;
  group = std::min(group, (g.N + threads - 1) / threads);
  group = std::min(group, kMaxColumnElements / (K * P));
  return std::max<int64_t>(group, 1);
}

// A per-thread scratch buffer from the caching allocator (no page faults on reuse). Column
// buffers are zeroed once, when the convolution pads: padded entries are never written after.
template <class T> struct Buffer {
  Tensor t;
  T* get(int64_t size, bool zero) {
    if (!t.defined() || t.numel() < size) {
      t = empty({size}, {dtype_of<T>()});
      if (zero) std::fill(t.data<T>(), t.data<T>() + size, T(0));
    }
    return t.data<T>();
  }
};

// y[n0 .. n0 + nb) = W * columns of those images (+ bias). A group's columns sit side by side
// ([K, nb P]); its GEMM result [O, nb P] is then split into the images' [O, P] blocks.
template <class T>
void forward_group(const T* x, const T* w, const T* bias, T* y, const ConvGeom& g, int64_t n0, int64_t nb,
                   Buffer<T>& col_buf, Buffer<T>& out_buf) {
  const int64_t K = g.K(), P = g.P(), O = g.O, ld = nb * P;
  const ConstMatMap<T> W(w, O, K);
  if (nb == 1 && g.pointwise()) {
    MatMap<T>(y + n0 * O * P, O, P).noalias() = W * ConstMatMap<T>(x + n0 * g.plane(), K, P);
  } else {
    T* cols = col_buf.get(K * ld, g.padded());
    for (int64_t b = 0; b < nb; ++b) im2col(x + (n0 + b) * g.plane(), g, cols, ld, b * P);
    if (nb == 1) {
      MatMap<T>(y + n0 * O * P, O, P).noalias() = W * ConstMatMap<T>(cols, K, ld);
    } else {
      MatMap<T> r(out_buf.get(O * ld, false), O, ld);
      r.noalias() = W * ConstMatMap<T>(cols, K, ld);
      for (int64_t b = 0; b < nb; ++b) MatMap<T>(y + (n0 + b) * O * P, O, P) = r.middleCols(b * P, P);
    }
  }
  if (bias)
    for (int64_t b = 0; b < nb; ++b)
      MatMap<T>(y + (n0 + b) * O * P, O, P).colwise() += Eigen::Map<const ColVec<T>>(bias, O);
}

// The weight's columns of the lowered taps, [O, C T] (column c T + t = weight[o, c, i_t, j_t]).
template <class T> const T* live_weight(const T* w, const ConvGeom& g, Buffer<T>& buf) {
  if (g.all_taps()) return w;
  const int64_t nt = int64_t(g.taps.size());
  T* out = buf.get(g.O * g.K(), false);
  for (int64_t oc = 0; oc < g.O * g.C; ++oc)
    for (int64_t t = 0; t < nt; ++t)
      out[oc * nt + t] = w[(oc * g.kh + g.taps[size_t(t)].i) * g.kw + g.taps[size_t(t)].j];
  return out;
}

template <class T> void conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& bias, T* y, const ConvGeom& g) {
  const int threads = omp_get_max_threads();
  const int64_t group = group_size(g, threads), groups = (g.N + group - 1) / group;
  const T* xp = x.data<T>();
  Buffer<T> weight_buf;
  const T* wp = live_weight(w.data<T>(), g, weight_buf);
  const T* bp = bias.defined() ? bias.data<T>() : nullptr;
  // Full groups share per-thread buffers (one layout, so padded entries stay zero); the last,
  // partial group lays its columns out narrower and gets fresh ones.
  const int64_t full = g.N / group;
  auto run = [&](int64_t gi, Buffer<T>& cols, Buffer<T>& out) {
    forward_group(xp, wp, bp, y, g, gi * group, std::min(group, g.N - gi * group), cols, out);
  };
  if (full >= threads && threads > 1) {
#pragma omp parallel
    {
      Buffer<T> cols, out;
#pragma omp for schedule(dynamic, 1)
      for (int64_t gi = 0; gi < full; ++gi) run(gi, cols, out);
    }
  } else {
    Buffer<T> cols, out;
    for (int64_t gi = 0; gi < full; ++gi) run(gi, cols, out);
  }
  if (full < groups) {
    Buffer<T> cols, out;
    run(full, cols, out);
  }
}

// Per-thread partial sums of the parameter gradients.
template <class T> struct ParamGrads {
  Mat<T> dw;
  ColVec<double> db;
};

// One image's share of the backward: dx[n], and its dweight / dbias terms added to `acc`.
template <class T>
void backward_image(const T* gp, const T* xp, const T* wp, T* dxp, const ConvGeom& g, int64_t n, ParamGrads<T>& acc,
                    Buffer<T>& col_buf, Buffer<T>& dcol_buf) {
  const int64_t K = g.K(), P = g.P(), O = g.O;
  const ConstMatMap<T> G(gp + n * O * P, O, P), W(wp, O, K);
  acc.db += G.rowwise().sum().template cast<double>();
  T* dx = dxp + n * g.plane();
  if (g.pointwise()) {
    acc.dw.noalias() += G * ConstMatMap<T>(xp + n * g.plane(), K, P).transpose();
    MatMap<T>(dx, K, P).noalias() = W.transpose() * G;
    return;
  }
  T* cols = col_buf.get(K * P, g.padded());
  im2col(xp + n * g.plane(), g, cols, P, 0);
  acc.dw.noalias() += G * ConstMatMap<T>(cols, K, P).transpose();
  MatMap<T> dcols(dcol_buf.get(K * P, false), K, P);
  dcols.noalias() = W.transpose() * G;
  col2im(dcols.data(), g, dx);  // dx arrives zeroed
}

}  // namespace

// Inputs (x [N, C, H, W], weight [O, C, kh, kw], bias? [O]) -> y [N, O, Ho, Wo].
void conv2d(const KernelArgs& k) {
  const Tensor& y = k.out[0];
  if (y.numel() == 0) return;
  const Tensor x = raw::contiguous(k.in[0]), w = raw::contiguous(k.in[1]);
  const Tensor bias = k.in[2].defined() ? raw::contiguous(k.in[2]) : Tensor();
  const ConvGeom g = geometry(x, w, y.shape(), attr<Conv2dAttrs>(k.attrs, "conv2d"), /*live_only=*/true);
  visit_float(x.dtype(), "conv2d", [&]<class T>() {
    if (g.K() > 0) {
      conv2d_forward<T>(x, w, bias, y.data<T>(), g);
      return;
    }
    MatMap<T> out(y.data<T>(), g.N * g.O, g.P());  // no input channels: y = bias
    for (int64_t r = 0; r < g.N * g.O; ++r) out.row(r).setConstant(bias.defined() ? bias.data<T>()[r % g.O] : T(0));
  });
}

// Inputs (grad [N, O, Ho, Wo], x, weight) -> (dx, dweight, dbias [O]).
void conv2d_backward(const KernelArgs& k) {
  const Tensor gt = raw::contiguous(k.in[0]), x = raw::contiguous(k.in[1]), w = raw::contiguous(k.in[2]);
  const ConvGeom g = geometry(x, w, gt.shape(), attr<Conv2dAttrs>(k.attrs, "conv2d_backward"), /*live_only=*/false);
  visit_float(x.dtype(), "conv2d_backward", [&]<class T>() {
    const int64_t K = g.K(), O = g.O;
    const int threads = std::max<int>(1, int(std::min<int64_t>(omp_get_max_threads(), g.N)));
    std::vector<ParamGrads<T>> acc(static_cast<size_t>(threads));
    for (auto& a : acc) {
      a.dw = Mat<T>::Zero(O, K);
      a.db = ColVec<double>::Zero(O);
    }
    T* dx = k.out[0].data<T>();
    std::fill(dx, dx + k.out[0].numel(), T(0));
#pragma omp parallel num_threads(threads)
    {
      Buffer<T> cols, dcols;
      ParamGrads<T>& mine = acc[size_t(omp_get_thread_num())];
#pragma omp for schedule(dynamic, 1)
      for (int64_t n = 0; n < g.N; ++n)
        if (g.P() > 0 && K > 0) backward_image(gt.data<T>(), x.data<T>(), w.data<T>(), dx, g, n, mine, cols, dcols);
    }
    for (int t = 1; t < threads; ++t) {
      acc[0].dw += acc[size_t(t)].dw;
      acc[0].db += acc[size_t(t)].db;
    }
    MatMap<T>(k.out[1].data<T>(), O, K) = acc[0].dw;
    Eigen::Map<ColVec<T>>(k.out[2].data<T>(), O) = acc[0].db.template cast<T>();
  });
}

}  // namespace qkv::kernels::cpu
