// The float32 inner loop of the decode attention (decode_attention.cpp) for heads of width 16, 32
// or 64: sixteen keys at a time, each block scored, softmaxed into the running sums and multiplied
// into the output rows while its K and V rows are in L1. A block's sixteen dot products are
// reduced together, the butterfly of a 16 x 16 transpose adding each pair of rows as it forms
// (45 shuffles and adds where a horizontal sum per key took about 100), and the softmax and P V of
// a block are vector operations on one register of scores. Scored key by key, with P V in a second
// pass over the tile, a K=V cache (half the bytes for the same arithmetic) was compute-bound.
#pragma once
#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>

#include "kernels/cpu/attention_products.h"

namespace qkv::kernels::cpu::attention_tiles::decode_keys {

using fixed_width::kLanes;
using fixed_width::vf;

// Stage h of the reduction: rows r and r + h (r < h) become one row whose lanes with bit h clear
// hold partial sums of row r's key and the others of row r + h's.
template <int h, size_t... c> void fold(vf* d, std::index_sequence<c...>) {
  for (int r = 0; r < h; ++r)
    d[r] = __builtin_shufflevector(d[r], d[r + h], fixed_width::butterfly_top(h, int(c))...) +
           __builtin_shufflevector(d[r], d[r + h], fixed_width::butterfly_bottom(h, int(c))...);
}
// Lane j of out: the sum of d[j]'s lanes (d is consumed). Vectors go by reference, as in
// attention_products.h.
inline void sum_each(vf (&d)[kLanes], vf& out) {
  constexpr auto lanes = std::make_index_sequence<kLanes>();
  fold<8>(d, lanes);
  fold<4>(d, lanes);
  fold<2>(d, lanes);
  fold<1>(d, lanes);
  out = d[0];
}

// Sixteen floats on the stack, seen by Eigen as a fixed-size array: its exp is vectorized over
// the target's widest packets.
using Lanes = Eigen::Map<Eigen::Array<float, kLanes, 1>, Eigen::Aligned64>;

// The largest of the sixteen lanes, halving the vector as sum_lanes does.
inline float max_lanes(const vf& v) {
  using v8 = float __attribute__((vector_size(32)));
  using v4 = float __attribute__((vector_size(16)));
  const v8 lo8 = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7),
           hi8 = __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
  const v8 a = lo8 > hi8 ? lo8 : hi8;  // lane by lane
  const v4 lo4 = __builtin_shufflevector(a, a, 0, 1, 2, 3), hi4 = __builtin_shufflevector(a, a, 4, 5, 6, 7);
  const v4 b = lo4 > hi4 ? lo4 : hi4;
  return std::max(std::max(b[0], b[1]), std::max(b[2], b[3]));
}

// y = e^x lane by lane.
inline void exp_lanes(const vf& x, vf& y) {
  alignas(64) float buf[kLanes];
  fixed_width::store(buf, x);
  Lanes lanes(buf);
  lanes = lanes.exp();
  fixed_width::load(y, buf);
}

// Rows [0, n) of a block whose rows (D floats) are ld apart, into L1.
template <int D> void prefetch_rows(const float* rows, int64_t ld, int64_t n) {
  constexpr int kLine = 64 / sizeof(float);
  for (int64_t r = 0; r < n; ++r)
    for (int d = 0; d < D; d += kLine) __builtin_prefetch(rows + r * ld + d, 0, 3);
}

// Keys stored unrotated, turned as they are read (a K=V cache under RoPE): key j of a call is at
// position first + j, turned by that row of the rotary tables cos, sin [P, half] (rotate-half
// pairs). Null tables: the keys are used as stored.
struct KeyTurn {
  const float* cos = nullptr;
  const float* sin = nullptr;
  int64_t half = 0, first = 0;
};

// A block's key row `src` at position `at` turned into `dst` (D floats, L1): whole heads of 32 or
// 64 in vector registers, the others (or a partial rotation) by a loop.
template <int D> inline void turn_key(const KeyTurn& t, int64_t at, const float* src, float* __restrict dst) {
  const float* __restrict c = t.cos + at * t.half;
  const float* __restrict s = t.sin + at * t.half;
  const int64_t half = t.half;
  if constexpr (D % (2 * kLanes) == 0) {
    constexpr int H = D / 2 / kLanes;  // vectors per half
    if (2 * half == D) {
      for (int i = 0; i < H; ++i) {
        vf a, b, co, si;
        fixed_width::load(a, src + i * kLanes);
        fixed_width::load(b, src + D / 2 + i * kLanes);
        fixed_width::load(co, c + i * kLanes);
        fixed_width::load(si, s + i * kLanes);
        fixed_width::store(dst + i * kLanes, a * co - b * si);
        fixed_width::store(dst + D / 2 + i * kLanes, b * co + a * si);
      }
      return;
    }
  }
#pragma omp simd
  for (int64_t i = 0; i < half; ++i) {
    const float a = src[i], b = src[i + half];
    dst[i] = a * c[i] - b * s[i];
    dst[i + half] = b * c[i] + a * s[i];
  }
  for (int64_t i = 2 * half; i < D; ++i) dst[i] = src[i];
}

// Folds keys [0, nj) of a tile into the running softmax of R query rows (q [R, D], row stride D):
// row r sees the tile's first visible[r] keys (at most nj); acc [R, D] holds its unnormalized
// output, m and l its running max and sum (m = -inf: nothing seen yet). k and v are rows ldk and
// ldv apart (v == k for K=V: each row read once for both). With `turn`, each block's sixteen key
// rows are turned into L1 once, for every query row, and the values read as stored.
template <int D>
void attend_keys(const float* q, int64_t R, const float* k, int64_t ldk, const float* v, int64_t ldv, int64_t nj,
                 const int64_t* visible, float scale, float* acc, float* m, float* l, const KeyTurn& turn = {}) {
  constexpr int V = D / kLanes;
  alignas(64) float turned[kLanes][D];
  for (int64_t j0 = 0; j0 < nj; j0 += kLanes) {
    const int64_t n = std::min<int64_t>(kLanes, nj - j0);
    const float* krow[kLanes];
    const float* vrow[kLanes];
    for (int j = 0; j < kLanes; ++j) {  // a short block repeats its last row (its weight is zeroed)
      krow[j] = k + (j0 + std::min<int64_t>(j, n - 1)) * ldk;
      vrow[j] = v + (j0 + std::min<int64_t>(j, n - 1)) * ldv;
    }
    // One query row over whole turned heads: each key is turned in registers as it is scored.
    const bool fused = turn.cos && R == 1 && D % (2 * kLanes) == 0 && 2 * turn.half == D;
    if (turn.cos && !fused)
      for (int j = 0; j < kLanes; ++j) {
        turn_key<D>(turn, turn.first + j0 + std::min<int64_t>(j, n - 1), krow[j], turned[j]);
        krow[j] = turned[j];
      }
    // The next block's rows, into L1 while this one is worked on: with one stream per thread
    // (K=V) the hardware prefetcher alone left the loop waiting on memory, at 60% of the speed.
    const int64_t next = std::min<int64_t>(kLanes, nj - j0 - kLanes);
    if (next > 0) {
      prefetch_rows<D>(k + (j0 + kLanes) * ldk, ldk, next);
      if (v != k) prefetch_rows<D>(v + (j0 + kLanes) * ldv, ldv, next);
    }
    for (int64_t r = 0; r < R; ++r) {
      const int64_t seen = std::min(n, visible[r] - j0);
      if (seen <= 0) continue;
      vf qr[V];
      for (int c = 0; c < V; ++c) fixed_width::load(qr[c], q + r * D + c * kLanes);
      vf dots[kLanes];
      if (fused) {
        for (int j = 0; j < kLanes; ++j) {
          const int64_t at = turn.first + j0 + std::min<int64_t>(j, n - 1);
          const float* c = turn.cos + at * turn.half;
          const float* s = turn.sin + at * turn.half;
          vf sum = {};
          for (int i = 0; i < V / 2; ++i) {
            vf a, b, co, si;
            fixed_width::load(a, krow[j] + i * kLanes);
            fixed_width::load(b, krow[j] + D / 2 + i * kLanes);
            fixed_width::load(co, c + i * kLanes);
            fixed_width::load(si, s + i * kLanes);
            sum += qr[i] * (a * co - b * si) + qr[V / 2 + i] * (b * co + a * si);
          }
          dots[j] = sum;
        }
      } else {
        for (int j = 0; j < kLanes; ++j) {
          vf w, sum = {};
          for (int c = 0; c < V; ++c) {
            fixed_width::load(w, krow[j] + c * kLanes);
            sum += qr[c] * w;
          }
          dots[j] = sum;
        }
      }
      vf sc;
      sum_each(dots, sc);
      sc *= scale;
      if (seen < kLanes)
        for (int64_t j = seen; j < kLanes; ++j) sc[j] = -std::numeric_limits<float>::infinity();
      const float block_max = max_lanes(sc);
      if (block_max == -std::numeric_limits<float>::infinity()) continue;  // NaN goes on, into the output
      const float m_new = std::max(m[r], block_max);
      float* out = acc + r * D;
      if (m_new > m[r]) {  // rescale what was summed under the old max (nothing, the first time)
        const float correction = std::exp(m[r] - m_new);
        l[r] *= correction;
        for (int c = 0; c < V; ++c) {
          vf o;
          fixed_width::load(o, out + c * kLanes);
          fixed_width::store(out + c * kLanes, correction * o);
        }
        m[r] = m_new;
      }
      vf p;
      exp_lanes(sc - m_new, p);
      if (seen < kLanes)  // keys the row does not see, or past the tile: exactly 0
        for (int64_t j = seen; j < kLanes; ++j) p[j] = 0;
      l[r] += fixed_width::sum_lanes(p);
      vf sum0[V] = {}, sum1[V] = {};  // two sets of accumulators: the FMAs' latency is hidden
      for (int j = 0; j < kLanes; j += 2)
        for (int c = 0; c < V; ++c) {
          vf w;
          fixed_width::load(w, vrow[j] + c * kLanes);
          sum0[c] += p[j] * w;
          fixed_width::load(w, vrow[j + 1] + c * kLanes);
          sum1[c] += p[j + 1] * w;
        }
      for (int c = 0; c < V; ++c) {
        vf o;
        fixed_width::load(o, out + c * kLanes);
        fixed_width::store(out + c * kLanes, o + sum0[c] + sum1[c]);
      }
    }
  }
}

}  // namespace qkv::kernels::cpu::attention_tiles::decode_keys
