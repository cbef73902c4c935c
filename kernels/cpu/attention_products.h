// The three products of an attention tile (at most 64 x 64 scores against heads of width D):
// scores = alpha a b^T, out += alpha a b and out += alpha a^T b. Eigen's general GEMM packs its
// operands and blocks for caches on every call, which at these sizes (64 x 64 x 16 in the
// paper's small models) costs more than the arithmetic; float32 heads of width 16, 32 or 64 take
// fixed-width loops instead, whose accumulators stay in vector registers. Other widths and
// float64 go through Eigen.
#pragma once
#include <Eigen/Core>
#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>

namespace qkv::kernels::cpu::attention_tiles {

inline constexpr int64_t kMaxTile = 64;  // rows and keys of a tile (kBlockQ, kBlockK)

namespace fixed_width {

// Sixteen floats as one value (GCC/Clang vector extension): a single AVX-512 register, or four
// SSE registers where the target has no AVX-512. Locals of this type stay in registers where
// float arrays, even under `omp simd`, went through the stack on every iteration.
using vf = float __attribute__((vector_size(64)));
inline constexpr int kLanes = 16;
// By reference: a vector passed or returned by value would change the calling convention
// between builds with and without AVX-512 (GCC's -Wpsabi).
inline void load(vf& v, const float* p) { __builtin_memcpy(&v, p, sizeof v); }
inline void store(float* p, const vf& v) { __builtin_memcpy(p, &v, sizeof v); }
// The sum of the sixteen lanes, halving the vector: a few shuffles and adds where GCC's own
// reduction spills the vector and adds its lanes one by one.
inline float sum_lanes(const vf& v) {
  using v8 = float __attribute__((vector_size(32)));
  using v4 = float __attribute__((vector_size(16)));
  const v8 a = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7) +
               __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
  const v4 b = __builtin_shufflevector(a, a, 0, 1, 2, 3) + __builtin_shufflevector(a, a, 4, 5, 6, 7);
  return (b[0] + b[2]) + (b[1] + b[3]);
}

// A butterfly stage of a 16 x 16 transpose: for every pair of rows (r, r + h) with bit h of r
// clear, the off-diagonal h x h blocks of each 2h x 2h block change places. Lane c of the new top
// row is top's lane c where bit h of c is clear, else bottom's lane c - h (indices of the second
// operand count from 16); the new bottom row the other way round.
constexpr int butterfly_top(int h, int c) { return (c & h) == 0 ? c : 16 + c - h; }
constexpr int butterfly_bottom(int h, int c) { return (c & h) == 0 ? c + h : 16 + c; }
template <int h, size_t... c> void butterfly(vf (&m)[16], std::index_sequence<c...>) {
  for (int r = 0; r < 16; ++r)
    if ((r & h) == 0) {
      const vf top = m[r], bottom = m[r + h];
      m[r] = __builtin_shufflevector(top, bottom, butterfly_top(h, int(c))...);
      m[r + h] = __builtin_shufflevector(top, bottom, butterfly_bottom(h, int(c))...);
    }
}
// Transposes a 16 x 16 block held as 16 rows, in place: stages h = 8, 4, 2, 1.
inline void transpose_16x16(vf (&m)[16]) {
  constexpr auto lanes = std::make_index_sequence<16>();
  butterfly<8>(m, lanes);
  butterfly<4>(m, lanes);
  butterfly<2>(m, lanes);
  butterfly<1>(m, lanes);
}

// s[ni x nj] (row stride lds) = alpha a[ni x D] b[nj x D]^T: b is transposed into a [D x 64]
// block once (16 x 16 blocks in registers), then four rows of s at a time are D broadcasts of
// a's entries times its rows: sixteen accumulators, each load of the block serving four rows.
template <int D>
void scores(float* s, int64_t lds, const float* a, int64_t lda, const float* b, int64_t ldb, int64_t ni, int64_t nj,
            float alpha) {
  constexpr int C = kMaxTile / kLanes, R = 4;
  alignas(64) float bt[D][kMaxTile];
  for (int64_t j0 = 0; j0 < kMaxTile; j0 += kLanes)
    for (int d0 = 0; d0 < D; d0 += kLanes) {
      vf m[16];
      for (int r = 0; r < 16; ++r) {
        if (j0 + r < nj) load(m[r], b + (j0 + r) * ldb + d0);
        else m[r] = vf{};  // a short tile's missing keys score 0 (and are not stored)
      }
      transpose_16x16(m);
      for (int d = 0; d < 16; ++d) store(&bt[d0 + d][j0], m[d]);
    }
  alignas(64) float row[R][kMaxTile];
  for (int64_t i = 0; i < ni; i += R) {
    const float* ar[R];
    for (int r = 0; r < R; ++r) ar[r] = a + std::min(i + r, ni - 1) * lda;  // a short block repeats its last row
    vf acc[R][C] = {};
    for (int d = 0; d < D; ++d)
      for (int c = 0; c < C; ++c) {
        vf w;
        load(w, &bt[d][c * kLanes]);
        for (int r = 0; r < R; ++r) acc[r][c] += ar[r][d] * w;
      }
    const bool full = nj == kMaxTile && i + R <= ni;  // straight into s
    for (int r = 0; r < R; ++r) {
      float* out = full ? s + (i + r) * lds : row[r];
      for (int c = 0; c < C; ++c) store(out + c * kLanes, alpha * acc[r][c]);
    }
    if (!full)
      for (int r = 0; r < R && i + r < ni; ++r)
        for (int64_t j = 0; j < nj; ++j) s[(i + r) * lds + j] = row[r][j];
  }
}

// Rows (or columns) of the output per pass of add_nn and add_tn: at least eight accumulators,
// so that the FMAs' latency is hidden, and each load of b serves that many of them.
template <int D> inline constexpr int kOutputBlock = D / kLanes >= 2 ? 4 : 8;

// c[ni x D] += alpha a[ni x nj] b[nj x D], kOutputBlock rows of c at a time (each row of b is
// read once for them), then the last rows four and one at a time.
template <int D>
void add_nn(float* c, int64_t ldc, const float* a, int64_t lda, const float* b, int64_t ldb, int64_t ni, int64_t nj,
            float alpha) {
  constexpr int V = D / kLanes;
  auto rows = [&]<int R>(int64_t i0) {
    vf acc[R][V] = {};
    for (int64_t j = 0; j < nj; ++j)
      for (int v = 0; v < V; ++v) {
        vf w;
        load(w, b + j * ldb + v * kLanes);
        for (int r = 0; r < R; ++r) acc[r][v] += a[(i0 + r) * lda + j] * w;
      }
    for (int r = 0; r < R; ++r)
      for (int v = 0; v < V; ++v) {
        float* out = c + (i0 + r) * ldc + v * kLanes;
        vf old;
        load(old, out);
        store(out, old + alpha * acc[r][v]);
      }
  };
  constexpr int R = kOutputBlock<D>;
  int64_t i = 0;
  for (; i + R <= ni; i += R) rows.template operator()<R>(i);
  for (; i + 4 <= ni; i += 4) rows.template operator()<4>(i);
  for (; i < ni; ++i) rows.template operator()<1>(i);
}

// c[nj x D] += alpha a[ni x nj]^T b[ni x D], kOutputBlock rows of c (columns of a) at a time.
template <int D>
void add_tn(float* c, int64_t ldc, const float* a, int64_t lda, const float* b, int64_t ldb, int64_t ni, int64_t nj,
            float alpha) {
  constexpr int R = kOutputBlock<D>, V = D / kLanes;
  for (int64_t j0 = 0; j0 < nj; j0 += R) {
    const int cols = int(std::min<int64_t>(R, nj - j0));
    int64_t col[R];
    for (int r = 0; r < R; ++r) col[r] = j0 + std::min(r, cols - 1);  // short blocks repeat a column
    vf acc[R][V] = {};
    for (int64_t i = 0; i < ni; ++i)
      for (int v = 0; v < V; ++v) {
        vf w;
        load(w, b + i * ldb + v * kLanes);
        for (int r = 0; r < R; ++r) acc[r][v] += a[i * lda + col[r]] * w;
      }
    for (int r = 0; r < cols; ++r)
      for (int v = 0; v < V; ++v) {
        float* out = c + (j0 + r) * ldc + v * kLanes;
        vf old;
        load(old, out);
        store(out, old + alpha * acc[r][v]);
      }
  }
}

// Calls f.template operator()<D>() for the fixed widths; false for any other width.
template <class Fn> bool with_width(int64_t width, Fn&& f) {
  switch (width) {
    case 16: f.template operator()<16>(); return true;
    case 32: f.template operator()<32>(); return true;
    case 64: f.template operator()<64>(); return true;
    default: return false;
  }
}

// Whether an Eigen expression is a row-major float block whose rows are contiguous.
template <class M> constexpr bool is_float_rows = std::is_same_v<typename M::Scalar, float>&& M::IsRowMajor;

}  // namespace fixed_width

// s = alpha a b^T; s is resized to a.rows() x b.rows().
template <class S, class A, class B> void tile_product_nt(S& s, const A& a, const B& b, typename S::Scalar alpha) {
  s.resize(a.rows(), b.rows());
  if constexpr (fixed_width::is_float_rows<A> && fixed_width::is_float_rows<B>) {
    if (a.rows() <= kMaxTile && b.rows() <= kMaxTile && a.cols() == b.cols() &&
        fixed_width::with_width(a.cols(), [&]<int D>() {
          fixed_width::scores<D>(s.data(), s.cols(), a.data(), a.outerStride(), b.data(), b.outerStride(), a.rows(),
                                 b.rows(), alpha);
        }))
      return;
  }
  s.noalias() = alpha * (a * b.transpose());
}

// c += alpha a b (c: a.rows() x b.cols()).
template <class C, class A, class B> void tile_add_nn(C&& c, const A& a, const B& b, typename A::Scalar alpha) {
  using CM = std::remove_cvref_t<C>;
  if constexpr (fixed_width::is_float_rows<CM> && fixed_width::is_float_rows<A> && fixed_width::is_float_rows<B>) {
    if (fixed_width::with_width(b.cols(), [&]<int D>() {
          fixed_width::add_nn<D>(c.data(), c.outerStride(), a.data(), a.outerStride(), b.data(), b.outerStride(),
                                 a.rows(), a.cols(), alpha);
        }))
      return;
  }
  c.noalias() += alpha * (a * b);
}

// c += alpha a^T b (c: a.cols() x b.cols()).
template <class C, class A, class B> void tile_add_tn(C&& c, const A& a, const B& b, typename A::Scalar alpha) {
  using CM = std::remove_cvref_t<C>;
  if constexpr (fixed_width::is_float_rows<CM> && fixed_width::is_float_rows<A> && fixed_width::is_float_rows<B>) {
    if (fixed_width::with_width(b.cols(), [&]<int D>() {
          fixed_width::add_tn<D>(c.data(), c.outerStride(), a.data(), a.outerStride(), b.data(), b.outerStride(),
                                 a.rows(), a.cols(), alpha);
        }))
      return;
  }
  c.noalias() += alpha * (a.transpose() * b);
}

}  // namespace qkv::kernels::cpu::attention_tiles
