// Layer norm and RMS norm CUDA kernels over the last dim, with optional affine weight (and layer
// norm bias), following kernels/cpu/layer_norm.cpp; kCentered picks the layer norm, else the RMS
// norm (no mean, rstd of the mean square). Forward and the dx part of backward run one block per row.
// dweight and dbias are column sums over the rows: a first kernel adds up chunks of rows per
// column in double (32 columns x 8 row lanes per block), a second adds the chunks in order, so
// the result is deterministic and needs no atomics.
#include <algorithm>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/launch.cuh"
#include "tensor/view.h"

namespace qkv::kernels::cuda {
namespace {

template <class T> const T* ptr_or_null(const Tensor& t) { return t.defined() ? t.data<T>() : nullptr; }

// Inputs contiguous [rows, n]; w, b and mean may be null (mean and b are for kCentered).
template <bool kCentered, class T>
__global__ void layer_norm_kernel(const T* x, const T* w, const T* b, T* y, T* mean, T* rstd, int64_t rows, int64_t n,
                                  T eps) {
  QKV_SHARED(T, smem, [kWarp]);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * n;
    T* yr = y + r * n;
    T mu = 0;
    if constexpr (kCentered) {
      T s = 0;
      for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += xr[i];
      mu = block_reduce(s, SumOp{}, smem) / T(n);
    }
    T v = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) v += (xr[i] - mu) * (xr[i] - mu);
    const T var = block_reduce(v, SumOp{}, smem) / T(n);
    const T rs = T(1) / sqrt_(var + eps);
    if (threadIdx.x == 0) {
      if (mean) mean[r] = mu;
      rstd[r] = rs;
    }
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      T o = (xr[i] - mu) * rs;
      if (w) o *= w[i];
      if (b) o += b[i];
      yr[i] = o;
    }
  }
}

// dx = rstd * (gw - mean(gw) - xhat * mean(gw * xhat)) (RMS norm: without mean(gw)), gw = g * w
// (or g), one block per row.
template <bool kCentered, class T>
__global__ void layer_norm_dx_kernel(const T* g, const T* x, const T* w, const T* mean, const T* rstd, T* dx,
                                     int64_t rows, int64_t n) {
  QKV_SHARED(T, smem, [kWarp]);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* gr = g + r * n;
    const T* xr = x + r * n;
    const T mu = kCentered ? mean[r] : T(0), rs = rstd[r];
    T s_gw = 0, s_gwx = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      const T gw = w ? gr[i] * w[i] : gr[i];
      s_gw += gw;
      s_gwx += gw * ((xr[i] - mu) * rs);
    }
    const T mean_gw = kCentered ? block_reduce(s_gw, SumOp{}, smem) / T(n) : T(0);
    const T mean_gwx = block_reduce(s_gwx, SumOp{}, smem) / T(n);
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      const T gw = w ? gr[i] * w[i] : gr[i];
      const T xhat = (xr[i] - mu) * rs;
      dx[r * n + i] = rs * (gw - mean_gw - xhat * mean_gwx);
    }
  }
}

constexpr int kColTile = 32;  // columns per block (one warp wide)
constexpr int kRowLanes = 8;  // rows walked side by side within a block

// partial[0][c][j] = sum of g * xhat, partial[1][c][j] = sum of g, over the rows of chunk c (mean
// null: the RMS norm's xhat).
template <class T>
__global__ void param_partials_kernel(const T* g, const T* x, const T* mean, const T* rstd, double* partial,
                                      int64_t rows, int64_t n, int64_t rows_per_chunk) {
  QKV_SHARED(double, sdw, [kRowLanes][kColTile]);
  QKV_SHARED(double, sdb, [kRowLanes][kColTile]);
  const int64_t j = int64_t(blockIdx.x) * kColTile + threadIdx.x;
  const int64_t c = blockIdx.y, r0 = c * rows_per_chunk, r1 = min(rows, r0 + rows_per_chunk);
  double dw = 0, db = 0;
  if (j < n)
    for (int64_t r = r0 + threadIdx.y; r < r1; r += kRowLanes) {
      const T gv = g[r * n + j];
      const T xhat = (x[r * n + j] - (mean ? mean[r] : T(0))) * rstd[r];
      dw += double(gv * xhat);
      db += double(gv);
    }
  sdw[threadIdx.y][threadIdx.x] = dw;
  sdb[threadIdx.y][threadIdx.x] = db;
  __syncthreads();
  if (threadIdx.y == 0 && j < n) {
    for (int l = 1; l < kRowLanes; ++l) {
      dw += sdw[l][threadIdx.x];
      db += sdb[l][threadIdx.x];
    }
    const int64_t chunks = gridDim.y;
    partial[c * n + j] = dw;
    partial[(chunks + c) * n + j] = db;
  }
}

// dweight[j], dbias[j]: the chunk partials of column j added in chunk order.
template <class T> struct ParamTotals {
  const double* partial;
  T* dweight;
  T* dbias;
  int64_t chunks, n;
  __device__ void operator()(int64_t j) const {
    double dw = 0, db = 0;
    for (int64_t c = 0; c < chunks; ++c) {
      dw += partial[c * n + j];
      db += partial[(chunks + c) * n + j];
    }
    dweight[j] = T(dw);
    if (dbias) dbias[j] = T(db);
  }
};

template <class T>
void param_grads(const Tensor& g, const Tensor& x, const T* mean, const T* rstd, const Tensor& dweight,
                 const Tensor& dbias, int64_t rows, int64_t n) {
  // At least 64 rows per chunk, at most 256 chunks.
  const int64_t chunks = std::clamp<int64_t>((rows + 63) / 64, 1, 256);
  const int64_t rows_per_chunk = (rows + chunks - 1) / chunks;
  const Tensor partial = empty({2, chunks, n}, {DType::f64, x.device()});
  const dim3 grid(unsigned((n + kColTile - 1) / kColTile), unsigned(chunks));
  QKV_LAUNCH(grid, dim3(kColTile, kRowLanes), 0, launch_stream(), param_partials_kernel<T>)
  (g.data<T>(), x.data<T>(), mean, rstd, partial.data<double>(), rows, n, rows_per_chunk);
  QKV_CUDA_LAUNCH_CHECK();
  launch_flat(n, ParamTotals<T>{partial.data<double>(), dweight.data<T>(), dbias.defined() ? dbias.data<T>() : nullptr,
                                chunks, n});
}

template <bool kCentered>
void norm_forward(const Tensor& x_in, const Tensor& w_in, const Tensor& b_in, double eps, const Tensor& y,
                  const Tensor& mean, const Tensor& rstd, const char* op) {
  const Tensor x = raw::contiguous(x_in);
  const Tensor w = w_in.defined() ? raw::contiguous(w_in) : Tensor();
  const Tensor b = b_in.defined() ? raw::contiguous(b_in) : Tensor();
  visit_float(x.dtype(), op, [&]<class T>() {
    const int64_t n = x.dim() ? x.shape().back() : 1, rows = n ? x.numel() / n : 0;
    if (rows == 0) return;
    set_device(x);
    QKV_LAUNCH(row_blocks(rows), row_threads(n), 0, launch_stream(), layer_norm_kernel<kCentered, T>)
    (x.data<T>(), ptr_or_null<T>(w), ptr_or_null<T>(b), y.data<T>(), mean.defined() ? mean.data<T>() : nullptr,
     rstd.data<T>(), rows, n, T(eps));
    QKV_CUDA_LAUNCH_CHECK();
  });
}

template <bool kCentered>
void norm_backward(const Tensor& g_in, const Tensor& x_in, const Tensor& w_in, const Tensor& mean_in,
                   const Tensor& rstd_in, const Tensor& dx, const Tensor& dw, const Tensor& db, const char* op) {
  const Tensor g = raw::contiguous(g_in);
  const Tensor x = raw::contiguous(x_in);
  const Tensor w = w_in.defined() ? raw::contiguous(w_in) : Tensor();
  const Tensor mean = mean_in.defined() ? raw::contiguous(mean_in) : Tensor();
  const Tensor rstd = raw::contiguous(rstd_in);
  visit_float(x.dtype(), op, [&]<class T>() {
    const int64_t n = x.dim() ? x.shape().back() : 1, rows = n ? x.numel() / n : 0;
    if (n == 0) return;
    set_device(x);
    const T* mp = mean.defined() ? mean.data<T>() : nullptr;
    if (rows > 0) {
      QKV_LAUNCH(row_blocks(rows), row_threads(n), 0, launch_stream(), layer_norm_dx_kernel<kCentered, T>)
      (g.data<T>(), x.data<T>(), ptr_or_null<T>(w), mp, rstd.data<T>(), dx.data<T>(), rows, n);
      QKV_CUDA_LAUNCH_CHECK();
    }
    param_grads<T>(g, x, mp, rstd.data<T>(), dw, db, rows, n);
  });
}

}  // namespace

// Inputs (x, weight?, bias?) -> outputs (y, mean, rstd).
void layer_norm(const KernelArgs& k) {
  norm_forward<true>(k.in[0], k.in[1], k.in[2], attr<LayerNormAttrs>(k.attrs, "layer_norm").eps, k.out[0], k.out[1],
                     k.out[2], "layer_norm");
}

// Inputs (grad_y, x, weight?, mean, rstd) -> outputs (dx, dweight, dbias).
void layer_norm_backward(const KernelArgs& k) {
  norm_backward<true>(k.in[0], k.in[1], k.in[2], k.in[3], k.in[4], k.out[0], k.out[1], k.out[2], "layer_norm_backward");
}

// Inputs (x, weight?) -> outputs (y, rstd).
void rms_norm(const KernelArgs& k) {
  norm_forward<false>(k.in[0], k.in[1], Tensor(), attr<LayerNormAttrs>(k.attrs, "rms_norm").eps, k.out[0], Tensor(),
                      k.out[1], "rms_norm");
}

// Inputs (grad_y, x, weight?, rstd) -> outputs (dx, dweight).
void rms_norm_backward(const KernelArgs& k) {
  norm_backward<false>(k.in[0], k.in[1], k.in[2], Tensor(), k.in[3], k.out[0], k.out[1], Tensor(), "rms_norm_backward");
}

}  // namespace qkv::kernels::cuda
