// Reduction CUDA kernels: sum, mean and amax over a set of dims, max (values and first index)
// over one dim. As in kernels/cpu/reduce.cpp the input is seen as a contiguous
// [outer, reduced, inner] tensor (permuted and copied first when the reduced dims are not one
// contiguous block). With inner == 1 each output is a row reduced by one block (warp shuffles,
// then shared memory; a few very long rows are cut into pieces first, and the pieces' partial
// results reduced in a second pass). Otherwise the outputs are columns: when there are many
// (>= 64K) or the columns are short, each thread walks one column; else (a bias gradient: sum
// over 12K tokens of [tokens, 1024..4096]) blocks of 32 columns x 8 row-threads each fold a chunk
// of rows into partial results [columns, splits], enough chunks for about 2048 blocks, and a
// second pass reduces each column's partials as a row. The order of additions depends only on
// the shape (not on the device or the launch), so results are deterministic. Float sums
// accumulate in double, as on the CPU.
#include <algorithm>
#include <limits>
#include <type_traits>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/layout.h"

namespace qkv::kernels::cuda {
namespace {

// Rows this short reduce faster with one thread per row than with a block per row.
constexpr int64_t kShortRow = 16;

// ---- fold reductions (sum, mean, amax) -----------------------------------------------------

// Accumulator type: double for float sums (as the CPU does), the element type otherwise.
template <class T> using SumAcc = std::conditional_t<std::is_floating_point_v<T>, double, T>;

// Finishing an accumulator: T(acc * scale) for float sums, T(acc) for integer sums and maxima.
struct ScaleFinish {
  double scale;
  template <class TO, class Acc> __device__ TO apply(Acc acc) const {
    if constexpr (std::is_floating_point_v<Acc>) return TO(acc * Acc(scale));
    else return TO(acc);
  }
};
// Keeps the accumulator as it is (partial results of a split row).
struct KeepFinish {
  template <class TO, class Acc> __device__ TO apply(Acc acc) const { return acc; }
};

// inner == 1. Each row of R elements is cut into `splits` pieces of `piece` elements; block b
// reduces pieces b, b + gridDim.x, ... and out[piece index] gets the finished result.
template <class TI, class TO, class Acc, class Op, class Fin>
__global__ void fold_rows_kernel(const TI* x, TO* out, int64_t O, int64_t R, int64_t splits, int64_t piece, Acc init,
                                 Op op, Fin fin) {
  QKV_SHARED(Acc, smem, [kWarp]);
  for (int64_t p = blockIdx.x; p < O * splits; p += gridDim.x) {
    const TI* row = x + (p / splits) * R;
    const int64_t r0 = p % splits * piece, r1 = min(R, r0 + piece);
    Acc acc = init;
    for (int64_t r = r0 + threadIdx.x; r < r1; r += blockDim.x) acc = op(acc, Acc(row[r]));
    acc = block_reduce(acc, op, smem);
    if (threadIdx.x == 0) out[p] = fin.template apply<TO>(acc);
  }
}

// General case: thread j folds column (j / I, j % I) over r, reading x[o, r, i].
template <class T, class Acc, class Op>
__global__ void fold_cols_kernel(const T* x, T* out, int64_t O, int64_t R, int64_t I, Acc init, Op op,
                                 ScaleFinish fin) {
  for (int64_t j = global_thread(); j < O * I; j += grid_threads()) {
    const T* p = x + (j / I) * R * I + j % I;
    Acc acc = init;
    for (int64_t r = 0; r < R; ++r) acc = op(acc, Acc(p[r * I]));
    out[j] = fin.template apply<T>(acc);
  }
}

// Column tiles: blockDim (kColTile, kColLanes). Block (t, s) folds columns
// [t * kColTile, (t + 1) * kColTile) (flat indices j over O * I; reads along i are coalesced)
// over rows [s * chunk, (s + 1) * chunk): row-thread y takes rows y, y + kColLanes, ... of the
// chunk, then row-thread 0 folds the kColLanes results in order. partial[j * gridDim.y + s]
// gets the accumulator.
constexpr int kColTile = 32;
constexpr int kColLanes = 8;

template <class T, class Acc, class Op>
__global__ void fold_col_tiles_kernel(const T* x, Acc* partial, int64_t O, int64_t R, int64_t I, int64_t chunk,
                                      Acc init, Op op) {
  QKV_SHARED(Acc, smem, [kColLanes][kColTile]);
  const int64_t j = blockIdx.x * int64_t(kColTile) + threadIdx.x;
  const int64_t r0 = blockIdx.y * chunk, r1 = min(R, r0 + chunk);
  const bool live = j < O * I;
  Acc acc = init;
  if (live) {
    const T* p = x + (j / I) * R * I + j % I;
#pragma unroll 4
    for (int64_t r = r0 + threadIdx.y; r < r1; r += kColLanes) acc = op(acc, Acc(p[r * I]));
  }
  smem[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && live) {
    for (int y = 1; y < kColLanes; ++y) acc = op(acc, smem[y][threadIdx.x]);
    partial[j * gridDim.y + blockIdx.y] = acc;
  }
}

// Column reductions split when there are fewer than kWideCols columns and the rows are long
// enough: chunks of at least kMinColChunk rows, about kColTargetBlocks blocks in all (two waves
// of 8 resident 256-thread blocks on each of ~132 SMs). Fixed numbers rather than the device's
// SM count, so a shape reduces in the same order on every GPU.
constexpr int64_t kWideCols = 1 << 16;
constexpr int64_t kMinColChunk = 64;
constexpr int64_t kColTargetBlocks = 1 << 11;

int64_t col_splits(int64_t cols, int64_t R) {
  if (cols >= kWideCols) return 1;
  const int64_t tiles = (cols + kColTile - 1) / kColTile;
  return std::max<int64_t>(1, std::min((kColTargetBlocks + tiles - 1) / tiles, R / kMinColChunk));
}

// With few rows, long rows are split so that enough blocks run: pieces of at least
// kMinPiece elements, about kTargetBlocks blocks in all.
constexpr int64_t kMinPiece = 1 << 12;
constexpr int64_t kTargetBlocks = 1 << 10;

int64_t row_splits(int64_t O, int64_t R) {
  if (O >= kTargetBlocks) return 1;
  return std::max<int64_t>(1, std::min(kTargetBlocks / O, R / kMinPiece));
}

template <class T, class Acc, class Op>
void fold(const Tensor& out, const ReduceLayout& L, Acc init, Op op, double scale) {
  const int64_t O = L.outer, R = L.reduced, I = L.inner;
  if (O * I == 0) return;
  set_device(out);
  const T* x = static_cast<const T*>(L.x.raw_data());
  T* o = static_cast<T*>(out.raw_data());
  const ScaleFinish fin{scale};
  if (I != 1 || R <= kShortRow) {
    const int64_t cols = O * I;
    const int64_t splits = I != 1 ? col_splits(cols, R) : 1;
    if (splits == 1) {
      QKV_LAUNCH(blocks_for(cols, kThreads), kThreads, 0, launch_stream(), fold_cols_kernel<T, Acc, Op>)
      (x, o, O, R, I, init, op, fin);
      QKV_CUDA_LAUNCH_CHECK();
      return;
    }
    // Two passes: chunks of rows into partial accumulators [cols, splits] (no empty chunk),
    // then each column's partials in order as a row.
    const int64_t chunk = (R + splits - 1) / splits, used = (R + chunk - 1) / chunk;
    const Tensor partial = empty({cols, used}, {dtype_of<Acc>(), out.device()});
    Acc* pp = partial.data<Acc>();
    const dim3 grid(unsigned((cols + kColTile - 1) / kColTile), unsigned(used));
    QKV_LAUNCH(grid, dim3(kColTile, kColLanes), 0, launch_stream(), fold_col_tiles_kernel<T, Acc, Op>)
    (x, pp, O, R, I, chunk, init, op);
    QKV_CUDA_LAUNCH_CHECK();
    QKV_LAUNCH(row_blocks(cols), row_threads(used), 0, launch_stream(), fold_rows_kernel)
    (static_cast<const Acc*>(pp), o, cols, used, 1, used, init, op, fin);
    QKV_CUDA_LAUNCH_CHECK();
    return;
  }
  const int64_t splits = row_splits(O, R);
  if (splits == 1) {
    QKV_LAUNCH(row_blocks(O), row_threads(R), 0, launch_stream(), fold_rows_kernel)(x, o, O, R, 1, R, init, op, fin);
    QKV_CUDA_LAUNCH_CHECK();
    return;
  }
  // Two passes: the pieces into partial accumulators [O, splits], then each row of partials
  // in order (deterministic, no atomics).
  const int64_t piece = (R + splits - 1) / splits;
  const Tensor partial = empty({O, splits}, {dtype_of<Acc>(), out.device()});
  Acc* pp = partial.data<Acc>();
  QKV_LAUNCH(row_blocks(O * splits), kThreads, 0, launch_stream(), fold_rows_kernel)
  (x, pp, O, R, splits, piece, init, op, KeepFinish{});
  QKV_CUDA_LAUNCH_CHECK();
  QKV_LAUNCH(row_blocks(O), row_threads(splits), 0, launch_stream(), fold_rows_kernel)
  (static_cast<const Acc*>(pp), o, O, splits, 1, splits, init, op, fin);
  QKV_CUDA_LAUNCH_CHECK();
}

// ---- max with indices ------------------------------------------------------------------------

// A candidate maximum and where it is; at < 0 marks "no element yet".
template <class T> struct ArgMax {
  T v;
  int64_t at;
};

// The CPU's sequential rule made order-free: the first NaN wins, otherwise the largest value,
// ties going to the lower index.
template <class T> __device__ __forceinline__ ArgMax<T> better(ArgMax<T> a, ArgMax<T> b) {
  if (a.at < 0) return b;
  if (b.at < 0) return a;
  const bool a_nan = a.v != a.v, b_nan = b.v != b.v;
  if (a_nan || b_nan) {
    if (a_nan && b_nan) return a.at < b.at ? a : b;
    return a_nan ? a : b;
  }
  if (a.v != b.v) return a.v > b.v ? a : b;
  return a.at < b.at ? a : b;
}

template <class T> __device__ ArgMax<T> block_argmax(ArgMax<T> m, T* sv, int64_t* si) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, warps = blockDim.x / kWarp;
#pragma unroll
  for (int o = kWarp / 2; o > 0; o >>= 1) {
    ArgMax<T> other{__shfl_xor_sync(0xffffffffu, m.v, o), __shfl_xor_sync(0xffffffffu, m.at, o)};
    m = better(m, other);
  }
  __syncthreads();
  if (lane == 0) {
    sv[warp] = m.v;
    si[warp] = m.at;
  }
  __syncthreads();
  ArgMax<T> r{sv[0], si[0]};
  for (int w = 1; w < warps; ++w) r = better(r, ArgMax<T>{sv[w], si[w]});
  return r;
}

template <class T> __global__ void max_rows_kernel(const T* x, T* values, int64_t* indices, int64_t O, int64_t R) {
  QKV_SHARED(T, sv, [kWarp]);
  QKV_SHARED(int64_t, si, [kWarp]);
  for (int64_t o = blockIdx.x; o < O; o += gridDim.x) {
    const T* row = x + o * R;
    ArgMax<T> m{T(0), -1};
    for (int64_t r = threadIdx.x; r < R; r += blockDim.x) m = better(m, ArgMax<T>{row[r], r});
    m = block_argmax(m, sv, si);
    if (threadIdx.x == 0) {
      values[o] = m.v;
      indices[o] = m.at;
    }
  }
}

template <class T>
__global__ void max_cols_kernel(const T* x, T* values, int64_t* indices, int64_t O, int64_t R, int64_t I) {
  for (int64_t j = global_thread(); j < O * I; j += grid_threads()) {
    const T* p = x + (j / I) * R * I + j % I;
    ArgMax<T> m{T(0), -1};
    for (int64_t r = 0; r < R; ++r) m = better(m, ArgMax<T>{p[r * I], r});
    values[j] = m.v;
    indices[j] = m.at;
  }
}

template <class T> T lowest() {
  if constexpr (std::is_floating_point_v<T>) return -std::numeric_limits<T>::infinity();
  else return std::numeric_limits<T>::lowest();
}

}  // namespace

void sum(const KernelArgs& k) {
  const auto& a = attr<ReduceAttrs>(k.attrs, "sum");
  const ReduceLayout L = reduce_layout(k.in[0], a.dims);
  visit_numeric(k.in[0].dtype(), "sum",
                [&]<class T>() { fold<T, SumAcc<T>>(k.out[0], L, SumAcc<T>(0), SumOp{}, 1.0); });
}

void mean(const KernelArgs& k) {
  const auto& a = attr<ReduceAttrs>(k.attrs, "mean");
  const ReduceLayout L = reduce_layout(k.in[0], a.dims);
  const double scale = L.reduced ? 1.0 / double(L.reduced) : std::numeric_limits<double>::quiet_NaN();
  visit_float(k.in[0].dtype(), "mean", [&]<class T>() { fold<T, double>(k.out[0], L, 0.0, SumOp{}, scale); });
}

void amax(const KernelArgs& k) {
  const auto& a = attr<ReduceAttrs>(k.attrs, "amax");
  const ReduceLayout L = reduce_layout(k.in[0], a.dims);
  check_reducible(L, "amax", k.in[0]);
  visit_numeric(k.in[0].dtype(), "amax", [&]<class T>() { fold<T, T>(k.out[0], L, lowest<T>(), NanMaxOp{}, 1.0); });
}

// Outputs (values, indices): the maximum along one dim and where it first occurs.
void max(const KernelArgs& k) {
  const int64_t dim = attr<DimAttrs>(k.attrs, "max").dim;
  const ReduceLayout L = reduce_layout(k.in[0], {dim});
  check_reducible(L, "max", k.in[0]);
  const int64_t O = L.outer, R = L.reduced, I = L.inner;
  if (O * I == 0) return;
  visit_numeric(k.in[0].dtype(), "max", [&]<class T>() {
    set_device(k.out[0]);
    const T* x = static_cast<const T*>(L.x.raw_data());
    T* v = k.out[0].data<T>();
    int64_t* idx = k.out[1].data<int64_t>();
    if (I == 1 && R > kShortRow)
      QKV_LAUNCH(row_blocks(O), row_threads(R), 0, launch_stream(), max_rows_kernel<T>)(x, v, idx, O, R);
    else QKV_LAUNCH(blocks_for(O * I, kThreads), kThreads, 0, launch_stream(), max_cols_kernel<T>)(x, v, idx, O, R, I);
    QKV_CUDA_LAUNCH_CHECK();
  });
}

}  // namespace qkv::kernels::cuda
