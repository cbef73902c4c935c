// Fused residual step of a pre-LN transformer: sum = x + dropout(y), normed = layer_norm(sum)
// (* weight + bias), plus the row mean and rstd; or (kCentered false) its RMS norm and rstd. It reproduces the unfused
// CUDA ops exactly: dropout as kernels/cuda/random.cu (flat element i keeps y when Philox word i of the stream at
// (seed, offset) is >= p as a unit double, scaled by T(1 / (1 - p)), the product rounded on its
// own), add in T as kernels/cuda/elementwise.cu, then layer_norm_kernel of
// kernels/cuda/layer_norm.cu: one block of row_threads(n) threads per row, per-thread sums in T
// over i = tid, tid + blockDim, ..., block_reduce, the same mean / biased variance / rstd /
// affine expressions, so the statistics round the same. x and y are read once. The keep flags
// of 4 * blockDim elements at a time go to shared memory, each thread drawing one Philox block
// (4 elements, as random.cu). The row's sums stay in registers (n <= 16 * blockDim), else in
// dynamic shared memory, else each thread re-reads the sum elements it wrote itself.
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/launch.cuh"
#include "tensor/philox.h"
#include "tensor/view.h"

namespace qkv::kernels::cuda {
namespace {

template <class T> const T* ptr_or_null(const Tensor& t) { return t.defined() ? t.data<T>() : nullptr; }

// y * scale rounded by itself, as dropout stores it before add reads it (never fused with the add).
__device__ __forceinline__ float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double mul_rn(double a, double b) { return __dmul_rn(a, b); }

// keep_all: p <= 0 (every unit draw is >= p); drop_all: !(p < 1), as dropout's scale of 0 and
// its never-true comparison give; random: the Philox comparison per element.
enum class DropMode : int { keep_all, drop_all, random };

constexpr int kMaxItems = 16;               // per-thread sums held in registers up to this
constexpr int kTileIters = 4;               // strided iterations per Philox tile (4 * blockDim elements)
constexpr int64_t kMaxBufBytes = 32 << 10;  // dynamic shared memory for longer rows, up to this

template <class T> struct Params {
  const T *x, *y, *w, *b;  // x, y contiguous [rows, n]; w, b [n] or null
  T *sum, *normed, *mean, *rstd;
  int64_t rows, n;
  DropMode mode;
  double p;
  T scale, eps;
  uint64_t seed, offset;
  bool buf_in_smem;  // kItems == 0: the row's sums in dynamic shared memory, else re-read from sum
};

// keep[e] for the tile's elements e < len, flat index f0 + e: element f's word is lane f % 4 of
// Philox block offset + f / 4, kept when its unit double is >= p (random.cu's DropoutFn).
template <class T> __device__ void fill_keep(const Params<T>& a, int64_t f0, int64_t len, uint8_t* keep) {
  const int64_t fb = f0 / 4, nb = (f0 + len - 1) / 4 - fb + 1;
  for (int64_t j = threadIdx.x; j < nb; j += blockDim.x) {
    const philox::U32x4 bits = philox::block(a.seed, a.offset + uint64_t(fb + j));
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int64_t e = (fb + j) * 4 + c - f0;
      if (e >= 0 && e < len) keep[e] = philox::to_unit_double(bits.v[c]) >= a.p ? 1 : 0;
    }
  }
}

// One block per row (grid-stride over rows), blockDim = row_threads(n). kItems > 0: thread tid
// holds its elements i = tid + k * blockDim (k < kItems, n <= kItems * blockDim) in registers.
template <bool kCentered, class T, int kItems> __global__ void dropout_add_layer_norm_kernel(Params<T> a) {
  QKV_SHARED(T, smem, [kWarp]);
  QKV_SHARED(uint8_t, keep, [kTileIters * kThreads]);
  QKV_DYNAMIC_SHARED(unsigned char, dyn_smem);
  const int tid = threadIdx.x, bd = blockDim.x;
  const int64_t n = a.n;
  const int64_t iters = kItems > 0 ? kItems : (n + bd - 1) / bd;
  T vals[kItems > 0 ? kItems : 1];
  for (int64_t r = blockIdx.x; r < a.rows; r += gridDim.x) {
    const T* xr = a.x + r * n;
    const T* yr = a.y + r * n;
    T* sr = a.sum + r * n;
    T* yo = a.normed + r * n;
    T* buf = a.buf_in_smem ? reinterpret_cast<T*>(dyn_smem) : sr;
    auto load = [&](int64_t k, int64_t i) -> T {
      if constexpr (kItems > 0) return vals[k];
      else return buf[i];
    };

    // sum = x + dropout(y), written once and kept; s as layer_norm's first loop adds it up.
    T s = 0;
#pragma unroll
    for (int64_t k = 0; k < iters; ++k) {
      const int64_t k0 = k * bd;
      if (k0 >= n) break;  // uniform over the block
      if (a.mode == DropMode::random && k % kTileIters == 0) {
        if (k > 0) __syncthreads();  // the previous tile's flags are read
        const int64_t end = k0 + int64_t(kTileIters) * bd;
        fill_keep(a, r * n + k0, (end < n ? end : n) - k0, keep);
        __syncthreads();
      }
      const int64_t i = k0 + tid;
      if (i < n) {
        T d = T(0);
        if (a.mode == DropMode::keep_all || (a.mode == DropMode::random && keep[(k % kTileIters) * bd + tid]))
          d = mul_rn(yr[i], a.scale);
        const T v = xr[i] + d;
        sr[i] = v;
        if constexpr (kItems > 0) vals[k] = v;
        else if (a.buf_in_smem) buf[i] = v;
        s += v;
      }
    }
    const T mu = kCentered ? block_reduce(s, SumOp{}, smem) / T(n) : T(0);
    T v = 0;
#pragma unroll
    for (int64_t k = 0; k < iters; ++k) {
      const int64_t i = k * bd + tid;
      if (i < n) {
        const T xi = load(k, i);
        v += (xi - mu) * (xi - mu);
      }
    }
    const T var = block_reduce(v, SumOp{}, smem) / T(n);
    const T rs = T(1) / sqrt_(var + a.eps);
    if (threadIdx.x == 0) {
      if (a.mean) a.mean[r] = mu;
      a.rstd[r] = rs;
    }
#pragma unroll
    for (int64_t k = 0; k < iters; ++k) {
      const int64_t i = k * bd + tid;
      if (i < n) {
        T o = (load(k, i) - mu) * rs;
        if (a.w) o *= a.w[i];
        if (a.b) o += a.b[i];
        yo[i] = o;
      }
    }
  }
}

template <bool kCentered, class T, int kItems> void launch(const Params<T>& p, int threads, size_t smem_bytes) {
  QKV_LAUNCH(row_blocks(p.rows), threads, smem_bytes, launch_stream(),
             dropout_add_layer_norm_kernel<kCentered, T, kItems>)
  (p);
  QKV_CUDA_LAUNCH_CHECK();
}

// The tensors of one call: b and mean undefined for the RMS norm.
struct NormOperands {
  Tensor x, y, w, b;
  Tensor normed, mean, rstd, sum;
};

template <bool kCentered> void dropout_add_norm(const NormOperands& o, const DropoutAddNormAttrs& a, const char* op) {
  const Tensor x = raw::contiguous(o.x);
  const Tensor y = raw::contiguous(o.y);
  const Tensor w = o.w.defined() ? raw::contiguous(o.w) : Tensor();
  const Tensor b = o.b.defined() ? raw::contiguous(o.b) : Tensor();
  visit_float(x.dtype(), op, [&]<class T>() {
    const int64_t n = x.dim() ? x.shape().back() : 1, rows = n ? x.numel() / n : 0;
    if (rows == 0) return;
    set_device(x);
    Params<T> p{};
    p.x = x.data<T>();
    p.y = y.data<T>();
    p.w = ptr_or_null<T>(w);
    p.b = ptr_or_null<T>(b);
    p.normed = o.normed.data<T>();
    p.mean = o.mean.defined() ? o.mean.data<T>() : nullptr;
    p.rstd = o.rstd.data<T>();
    p.sum = o.sum.data<T>();
    p.rows = rows;
    p.n = n;
    p.mode = !(a.p < 1) ? DropMode::drop_all : a.p <= 0 ? DropMode::keep_all : DropMode::random;
    p.p = a.p;
    p.scale = a.p < 1 ? T(1.0 / (1.0 - a.p)) : T(0);  // as random.cu's dropout
    p.eps = T(a.eps);
    p.seed = a.seed;
    p.offset = a.offset;
    const int threads = row_threads(n);
    const int64_t per = (n + threads - 1) / threads;
    if (per <= 1) launch<kCentered, T, 1>(p, threads, 0);
    else if (per <= 2) launch<kCentered, T, 2>(p, threads, 0);
    else if (per <= 4) launch<kCentered, T, 4>(p, threads, 0);
    else if (per <= 8) launch<kCentered, T, 8>(p, threads, 0);
    else if (per <= kMaxItems) launch<kCentered, T, kMaxItems>(p, threads, 0);
    else {
      const int64_t bytes = n * int64_t(sizeof(T));
      p.buf_in_smem = bytes <= kMaxBufBytes;
      launch<kCentered, T, 0>(p, threads, p.buf_in_smem ? size_t(bytes) : 0);
    }
  });
}

}  // namespace

// Inputs (x, y [..., D], weight? bias? [D]) -> outputs (normed, mean, rstd: layer_norm's outputs
// for sum; sum = x + dropout(y)), all contiguous in x's dtype, as kernels/cpu/residual_norm.cpp.
void dropout_add_layer_norm(const KernelArgs& k) {
  dropout_add_norm<true>({k.in[0], k.in[1], k.in[2], k.in[3], k.out[0], k.out[1], k.out[2], k.out[3]},
                         attr<DropoutAddNormAttrs>(k.attrs, "dropout_add_layer_norm"), "dropout_add_layer_norm");
}

// Inputs (x, y [..., D], weight? [D]) -> outputs (normed, rstd: rms_norm's outputs for sum; sum).
void dropout_add_rms_norm(const KernelArgs& k) {
  dropout_add_norm<false>({k.in[0], k.in[1], k.in[2], Tensor(), k.out[0], Tensor(), k.out[1], k.out[2]},
                          attr<DropoutAddNormAttrs>(k.attrs, "dropout_add_rms_norm"), "dropout_add_rms_norm");
}

}  // namespace qkv::kernels::cuda
