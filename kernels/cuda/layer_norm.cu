// Layer norm CUDA kernels over the last dim, with optional affine weight and bias, following
// kernels/cpu/layer_norm.cpp. Forward and the dx part of backward run one block per row.
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

// Inputs contiguous [rows, n]; w and b may be null.
template <class T>
__global__ void layer_norm_kernel(const T* x, const T* w, const T* b, T* y, T* mean, T* rstd, int64_t rows, int64_t n,
                                  T eps) {
  QKV_SHARED(T, smem, [kWarp]);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * n;
    T* yr = y + r * n;
    T s = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += xr[i];
    const T mu = block_reduce(s, SumOp{}, smem) / T(n);
    T v = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) v += (xr[i] - mu) * (xr[i] - mu);
    const T var = block_reduce(v, SumOp{}, smem) / T(n);
    const T rs = T(1) / sqrt_(var + eps);
    if (threadIdx.x == 0) {
      mean[r] = mu;
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

// dx = rstd * (gw - mean(gw) - xhat * mean(gw * xhat)), gw = g * w (or g), one block per row.
template <class T>
__global__ void layer_norm_dx_kernel(const T* g, const T* x, const T* w, const T* mean, const T* rstd, T* dx,
                                     int64_t rows, int64_t n) {
  QKV_SHARED(T, smem, [kWarp]);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* gr = g + r * n;
    const T* xr = x + r * n;
    const T mu = mean[r], rs = rstd[r];
    T s_gw = 0, s_gwx = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      const T gw = w ? gr[i] * w[i] : gr[i];
      s_gw += gw;
      s_gwx += gw * ((xr[i] - mu) * rs);
    }
    const T mean_gw = block_reduce(s_gw, SumOp{}, smem) / T(n);
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

// partial[0][c][j] = sum of g * xhat, partial[1][c][j] = sum of g, over the rows of chunk c.
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
      const T xhat = (x[r * n + j] - mean[r]) * rstd[r];
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
    dbias[j] = T(db);
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
  launch_flat(n, ParamTotals<T>{partial.data<double>(), dweight.data<T>(), dbias.data<T>(), chunks, n});
}

}  // namespace

// Inputs (x, weight?, bias?) -> outputs (y, mean, rstd).
void layer_norm(const KernelArgs& k) {
  const double eps = attr<LayerNormAttrs>(k.attrs, "layer_norm").eps;
  const Tensor x = raw::contiguous(k.in[0]);
  const Tensor w = k.in[1].defined() ? raw::contiguous(k.in[1]) : Tensor();
  const Tensor b = k.in[2].defined() ? raw::contiguous(k.in[2]) : Tensor();
  visit_float(x.dtype(), "layer_norm", [&]<class T>() {
    const int64_t n = x.dim() ? x.shape().back() : 1, rows = n ? x.numel() / n : 0;
    if (rows == 0) return;
    set_device(x);
    QKV_LAUNCH(row_blocks(rows), row_threads(n), 0, launch_stream(), layer_norm_kernel<T>)
    (x.data<T>(), ptr_or_null<T>(w), ptr_or_null<T>(b), k.out[0].data<T>(), k.out[1].data<T>(), k.out[2].data<T>(),
     rows, n, T(eps));
    QKV_CUDA_LAUNCH_CHECK();
  });
}

// Inputs (grad_y, x, weight?, mean, rstd) -> outputs (dx, dweight, dbias).
void layer_norm_backward(const KernelArgs& k) {
  const Tensor g = raw::contiguous(k.in[0]);
  const Tensor x = raw::contiguous(k.in[1]);
  const Tensor w = k.in[2].defined() ? raw::contiguous(k.in[2]) : Tensor();
  const Tensor mean = raw::contiguous(k.in[3]);
  const Tensor rstd = raw::contiguous(k.in[4]);
  visit_float(x.dtype(), "layer_norm_backward", [&]<class T>() {
    const int64_t n = x.dim() ? x.shape().back() : 1, rows = n ? x.numel() / n : 0;
    if (n == 0) return;
    set_device(x);
    if (rows > 0) {
      QKV_LAUNCH(row_blocks(rows), row_threads(n), 0, launch_stream(), layer_norm_dx_kernel<T>)
      (g.data<T>(), x.data<T>(), ptr_or_null<T>(w), mean.data<T>(), rstd.data<T>(), k.out[0].data<T>(), rows, n);
      QKV_CUDA_LAUNCH_CHECK();
    }
    param_grads<T>(g, x, mean.data<T>(), rstd.data<T>(), k.out[1], k.out[2], rows, n);
  });
}

}  // namespace qkv::kernels::cuda
