// The pieces the CPU attention kernels share (attention.cpp: the tiled forward and backward;
// decode_attention.cpp: the few-query forward of decoding): Eigen views of [B, H, T, D] heads
// read in place, score tiles with causal masking aligned to the bottom-right, and tiles of a
// 16-bit or int8 KV cache widened one at a time.
#pragma once
#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "kernels/cpu/attention_products.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/layout.h"
#include "tensor/view.h"

namespace qkv::kernels::cpu::attention_tiles {

using Eigen::Dynamic;
template <class T> using RowMat = Eigen::Matrix<T, Dynamic, Dynamic, Eigen::RowMajor>;
template <class T> using ConstMap = Eigen::Map<const RowMat<T>, 0, Eigen::OuterStride<>>;
template <class T> using MutMap = Eigen::Map<RowMat<T>, 0, Eigen::OuterStride<>>;
template <class T> using Vec = Eigen::Matrix<T, Dynamic, 1>;

inline constexpr int64_t kBlockQ = kMaxTile, kBlockK = kMaxTile;

// A [B, H, T, D] tensor whose last dim is contiguous (a permuted [B, T, H, D] projection is
// used in place); heads are read as T x D row-major matrices with the tensor's row stride. An
// int8 tensor (a quantized KV cache) comes with its float32 scales [B, H, T, 1], one per row.
// Cached keys stored unrotated (a K=V cache under RoPE) come with the rotary tables cos, sin
// [P, R/2], contiguous in the compute dtype: row r is turned by row r of the tables as read.
struct Heads {
  Tensor t, scales, cos, sin;
  int64_t heads = 0, rows = 0, cols = 0;
  explicit Heads(const Tensor& x, const Tensor& row_scales = Tensor())
      : t(x.stride(-1) == 1 ? x : raw::contiguous(x)), scales(row_scales) {
    heads = t.shape()[1];
    rows = t.shape()[2];
    cols = t.shape()[3];
  }
  template <class T> ConstMap<T> head(int64_t b, int64_t h) const {
    const T* p = static_cast<const T*>(t.raw_data()) + b * t.stride(0) + h * t.stride(1);
    return ConstMap<T>(p, rows, cols, Eigen::OuterStride<>(t.stride(2)));
  }
  bool rotary() const { return cos.defined(); }
  // The scale of row r of head (b, h).
  float scale(int64_t b, int64_t h, int64_t r) const {
    return scales.data<float>()[b * scales.stride(0) + h * scales.stride(1) + r * scales.stride(2)];
  }
};

// Whether keys and values are one tensor read once per tile: K=V, unless the keys are turned as
// read (then the values are the rows as stored).
inline bool reads_once(const Heads& K, const Heads& V) { return same_view(K.t, V.t) && !K.rotary(); }

// Head (b, h) of a [B, H, T, D] output as a writable T x D map with the output's row stride:
// outputs follow their operand's layout (autograd/shape_rules.cpp), heads within tokens or not.
template <class T> MutMap<T> out_head(const Tensor& t, int64_t b, int64_t h) {
  T* p = t.data<T>() + b * t.stride(0) + h * t.stride(1);
  return MutMap<T>(p, t.shape()[2], t.shape()[3], Eigen::OuterStride<>(t.stride(2)));
}

// The visible key range [0, end) for query row i: all keys, or bottom-right causal.
inline int64_t visible_keys(int64_t i, int64_t T, int64_t S, bool causal) {
  if (!causal) return S;
  return std::clamp<int64_t>(i + 1 + S - T, 0, S);
}

// Scores of a tile: scale * q_tile k_tile^T + bias, with masked entries at -inf; the tiles are
// query rows [i0, i0 + ni) and keys [j0, j0 + nj).
template <class T, class QTile, class KTile>
void scores_of(RowMat<T>& s, const QTile& q, const KTile& k, int64_t i0, int64_t j0, T scale, const T* bias, int64_t S,
               int64_t T_, bool causal) {
  const int64_t ni = q.rows(), nj = k.rows();
  tile_product_nt(s, q, k, scale);
  if (bias) s += ConstMap<T>(bias + i0 * S + j0, ni, nj, Eigen::OuterStride<>(S));
  if (causal)
    for (int64_t r = 0; r < ni; ++r)
      for (int64_t c = visible_keys(i0 + r, T_, S, true) - j0; c < nj; ++c)
        if (c >= 0) s(r, c) = -std::numeric_limits<T>::infinity();
}

// The same from whole heads q [T, D] and k [S, D].
template <class T>
inline void tile_scores(RowMat<T>& s, const ConstMap<T>& q, const ConstMap<T>& k, int64_t i0, int64_t ni, int64_t j0,
                        int64_t nj, T scale, const T* bias, int64_t S, int64_t T_, bool causal) {
  scores_of<T>(s, q.middleRows(i0, ni), k.middleRows(j0, nj), i0, j0, scale, bias, S, T_, causal);
}

// Row r of a head turned at position `at` by x's rotary tables (rotate-half pairs), from `src`
// (as stored, times `scale`) into `dst`: one pass, vectorized over the pairs.
template <class F, class S> inline void turn_row(const Heads& x, int64_t at, const S* src, F scale, F* __restrict dst) {
  const int64_t half = x.cos.shape()[1], cols = x.cols;
  const F* __restrict c = x.cos.data<F>() + at * half;
  const F* __restrict s = x.sin.data<F>() + at * half;
#pragma omp simd
  for (int64_t i = 0; i < half; ++i) {
    const F a = F(src[i]) * scale, b = F(src[i + half]) * scale;
    dst[i] = a * c[i] - b * s[i];
    dst[i + half] = b * c[i] + a * s[i];
  }
  for (int64_t i = 2 * half; i < cols; ++i) dst[i] = F(src[i]) * scale;
}

// Rows [r0, r0 + n) of head (b, h) as a ConstMap<F>: in place when stored as F, else converted
// into `buf` (so a bf16 KV cache is read as bf16, one tile at a time, never copied whole); int8
// rows are multiplied by their scales on the way; rotary rows are turned in `buf`.
template <class F, class S>
ConstMap<F> rows_of(const Heads& x, int64_t b, int64_t h, int64_t r0, int64_t n, RowMat<F>& buf) {
  const int64_t ld = x.t.stride(2);
  const S* p = static_cast<const S*>(x.t.raw_data()) + b * x.t.stride(0) + h * x.t.stride(1) + r0 * ld;
  if constexpr (std::is_same_v<S, F>)
    if (!x.rotary()) return ConstMap<F>(p, n, x.cols, Eigen::OuterStride<>(ld));
  buf.resize(n, x.cols);
  for (int64_t r = 0; r < n; ++r) {
    const F scale = std::is_same_v<S, int8_t> ? F(x.scale(b, h, r0 + r)) : F(1);
    F* row = buf.data() + r * x.cols;
    if (x.rotary()) turn_row(x, r0 + r, p + r * ld, scale, row);
    else
      for (int64_t c = 0; c < x.cols; ++c) row[c] = F(p[r * ld + c]) * scale;
  }
  return ConstMap<F>(buf.data(), n, x.cols, Eigen::OuterStride<>(x.cols));
}

// Calls f with a score row (contiguous) as an Eigen array: a fixed-size map when the row is a
// whole tile, so that its reductions and exponentials are unrolled over vector registers with
// no loop bounds or tails (per row, the dynamic expressions cost more than the row's products),
// else the row itself.
template <class Row, class Fn> void with_score_row(Row&& row, Fn&& f) {
  using T = typename std::remove_cvref_t<Row>::Scalar;
  if (row.size() == kMaxTile) {
    Eigen::Map<Eigen::Array<T, kMaxTile, 1>> fixed(row.data());
    f(fixed);
  } else {
    auto dynamic = row.array();
    f(dynamic);
  }
}

// Folds one row of a score tile into a running (flash) softmax: the row is replaced by its
// exponentials against the new running max m, l (their running sum) and the output row acc are
// rescaled to it. A row with nothing visible yet (max -inf) becomes zeros and changes nothing.
template <class F, class ScoreRow, class AccRow> void online_softmax_row(ScoreRow&& s, AccRow&& acc, F& m, F& l) {
  const F ninf = -std::numeric_limits<F>::infinity();
  with_score_row(s, [&](auto& x) {
    const F m_new = std::max(m, x.maxCoeff());
    if (m_new == ninf) {
      x.setZero();
      return;
    }
    x = (x - m_new).exp();
    if (m == ninf) {  // the first tile with a visible key: nothing summed or accumulated yet
      l = x.sum();
    } else {
      const F correction = std::exp(m - m_new);
      l = l * correction + x.sum();
      acc *= correction;
    }
    m = m_new;
  });
}

// The forward over few query rows per KV head (decoding, no bias): every query head of a KV
// head's group in one block, so each cached K/V row is read once per step whatever the group,
// and the keys split across threads when there are fewer (batch, KV head) pairs than threads,
// the splits' partial softmaxes merged at the end (decode_attention.cpp).
inline constexpr int64_t kDecodeMaxQueries = 16, kDecodeRows = 64;
inline bool is_decode_shape(const Heads& Q, const Heads& K) {
  return Q.rows <= kDecodeMaxQueries && Q.rows * (Q.heads / K.heads) <= kDecodeRows;
}
template <class St, class Kv>
void attend_decode(const Heads& Q, const Heads& K, const Heads& V, const KernelArgs& k, const AttentionAttrs& a);

}  // namespace qkv::kernels::cpu::attention_tiles
