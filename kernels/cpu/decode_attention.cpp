// attend_decode (attention_tiles.h): the attention forward of decoding on the CPU. A decode step
// has one query row per head and reads the whole cache, so it is bound by memory bandwidth: the
// kernel reads every cached K/V row once (K=V: one row serves both; GQA/MQA: a KV head's query
// heads are one block of rows), and keeps both threads busy at batch 1 by splitting the keys.
#include <omp.h>

#include <vector>

#include "kernels/cpu/attention_tiles.h"
#include "kernels/cpu/decode_keys.h"

namespace qkv::kernels::cpu::attention_tiles {
namespace {

// Keys per split: enough that each split streams a long run of rows.
constexpr int64_t kMinKeysPerSplit = 256;
// Keys per tile: the scores of a tile stay in L1 beside one query block.
constexpr int64_t kDecodeTile = 256;

int64_t key_splits(int64_t pairs, int64_t S) {
  const int64_t threads = omp_get_max_threads();
  const int64_t wanted = (2 * threads + pairs - 1) / pairs;  // two tasks per thread at least
  return std::clamp<int64_t>(wanted, 1, std::max<int64_t>(1, S / kMinKeysPerSplit));
}

// Four dot products of query row q with key rows k, k + ld, k + 2 ld, k + 3 ld (D of each).
template <class F> void four_dots(const F* __restrict q, const F* __restrict k, int64_t ld, int64_t D, F out[4]) {
  if constexpr (std::is_same_v<F, float>) {
    using fixed_width::kLanes;
    if (D % kLanes == 0) {  // sixteen lanes at a time, each sum reduced once at the end
      fixed_width::vf a0 = {}, a1 = {}, a2 = {}, a3 = {}, x, w;
      for (int64_t d = 0; d < D; d += kLanes) {
        fixed_width::load(x, q + d);
        fixed_width::load(w, k + d);
        a0 += x * w;
        fixed_width::load(w, k + ld + d);
        a1 += x * w;
        fixed_width::load(w, k + 2 * ld + d);
        a2 += x * w;
        fixed_width::load(w, k + 3 * ld + d);
        a3 += x * w;
      }
      out[0] = fixed_width::sum_lanes(a0);
      out[1] = fixed_width::sum_lanes(a1);
      out[2] = fixed_width::sum_lanes(a2);
      out[3] = fixed_width::sum_lanes(a3);
      return;
    }
  }
  F a0 = 0, a1 = 0, a2 = 0, a3 = 0;
#pragma omp simd reduction(+ : a0, a1, a2, a3)
  for (int64_t d = 0; d < D; ++d) {
    a0 += q[d] * k[d];
    a1 += q[d] * k[ld + d];
    a2 += q[d] * k[2 * ld + d];
    a3 += q[d] * k[3 * ld + d];
  }
  out[0] = a0, out[1] = a1, out[2] = a2, out[3] = a3;
}

// s [R, nj] = scale q kt^T. Four keys at a time, so each query row is loaded once per four
// keys and the four dot products' horizontal sums overlap.
template <class F> void scores(const RowMat<F>& q, const ConstMap<F>& kt, F scale, RowMat<F>& s) {
  const int64_t R = q.rows(), nj = kt.rows(), D = q.cols(), ld = kt.outerStride();
  s.resize(R, nj);
  for (int64_t r = 0; r < R; ++r) {
    const F* qr = q.data() + r * D;
    int64_t j = 0;
    for (; j + 4 <= nj; j += 4) {
      F dots[4];
      four_dots(qr, kt.data() + j * ld, ld, D, dots);
      for (int c = 0; c < 4; ++c) s(r, j + c) = scale * dots[c];
    }
    for (; j < nj; ++j) s(r, j) = scale * kt.row(j).dot(q.row(r));
  }
}

}  // namespace

template <class St, class Kv>
void attend_decode(const Heads& Q, const Heads& K, const Heads& V, const KernelArgs& k, const AttentionAttrs& a) {
  using F = compute_t<St>;
  const bool kv_shared = reads_once(K, V);
  const int64_t B = Q.t.shape()[0], H = Q.heads, Hk = K.heads, T = Q.rows, S = K.rows, D = Q.cols, Dv = V.cols;
  const int64_t group = H / Hk, R = group * T;  // rows of a task: query head g's row t is g * T + t
  const int64_t splits = key_splits(B * Hk, S);
  const int64_t chunk = ((S + splits - 1) / splits + kDecodeTile - 1) / kDecodeTile * kDecodeTile;
  const F scale = F(a.scale), ninf = -std::numeric_limits<F>::infinity();
  // float32 heads of width 16, 32 or 64 take the fixed-width loop (decode_keys.h); a cache stored
  // as float32 is then read in place, the whole split as one tile, so each block's prefetch of
  // the next runs on to the split's end (keys turned as read: a tile at a time, in a buffer).
  const bool fixed = std::is_same_v<F, float> && D == Dv && fixed_width::with_width(D, []<int>() {});
  const int64_t tile = fixed && std::is_same_v<Kv, F> ? chunk : kDecodeTile;
  // A float32 cache's unrotated keys are turned inside the fixed-width loop, sixteen at a time in
  // L1 (decode_keys::KeyTurn): the rows are read in place, once for keys and values.
  const bool turn_in_loop = fixed && std::is_same_v<Kv, F> && K.rotary();
  Heads K_stored = K;
  if (turn_in_loop) K_stored.cos = K_stored.sin = Tensor();
  // Per (b, hk, split): the unnormalized output rows, their running max and sum.
  std::vector<F> part_acc(size_t(B * Hk * splits * R * Dv)), part_m(size_t(B * Hk * splits * R)),
      part_l(size_t(B * Hk * splits * R));
#pragma omp parallel for collapse(3) schedule(static) if (B * Hk * splits > 1 && R * S * D >= (1 << 14))
  for (int64_t b = 0; b < B; ++b)
    for (int64_t hk = 0; hk < Hk; ++hk)
      for (int64_t sp = 0; sp < splits; ++sp) {
        const int64_t task = (b * Hk + hk) * splits + sp;
        RowMat<F> q(R, D), qbuf, kbuf, vbuf, s;
        std::vector<int64_t> row_sees(static_cast<size_t>(R));  // per row: how many of the tile's keys it sees
        for (int64_t g = 0; g < group; ++g) q.middleRows(g * T, T) = rows_of<F, St>(Q, b, hk * group + g, 0, T, qbuf);
        // The running sums live in the task's own memory until it ends: the shared arrays hold
        // several tasks' m and l in one cache line, which the two threads would pass back and forth.
        RowMat<F> acc = RowMat<F>::Zero(R, Dv);
        Vec<F> m = Vec<F>::Constant(R, ninf), l = Vec<F>::Zero(R);
        const int64_t end = std::min(S, (sp + 1) * chunk);
        for (int64_t j0 = sp * chunk; j0 < end; j0 += tile) {
          const int64_t nj = std::min(tile, end - j0);
          const ConstMap<F> kt = rows_of<F, Kv>(turn_in_loop ? K_stored : K, b, hk, j0, nj, kbuf);
          // K=V read once; keys turned in the loop: the values are the same rows, in place.
          const ConstMap<F> vt =
              kv_shared || (turn_in_loop && same_view(K.t, V.t)) ? kt : rows_of<F, Kv>(V, b, hk, j0, nj, vbuf);
          if constexpr (std::is_same_v<F, float>) {
            if (fixed) {
              for (int64_t r = 0; r < R; ++r) row_sees[size_t(r)] = visible_keys(r % T, T, S, a.causal) - j0;
              decode_keys::KeyTurn turn;
              if (turn_in_loop) turn = {K.cos.data<float>(), K.sin.data<float>(), K.cos.shape()[1], j0};
              fixed_width::with_width(D, [&]<int W>() {
                decode_keys::attend_keys<W>(q.data(), R, kt.data(), kt.outerStride(), vt.data(), vt.outerStride(), nj,
                                            row_sees.data(), scale, acc.data(), m.data(), l.data(), turn);
              });
              continue;
            }
          }
          scores(q, kt, scale, s);
          for (int64_t r = 0; r < R; ++r) {
            const int64_t visible = visible_keys(r % T, T, S, a.causal) - j0;
            if (visible < nj) s.row(r).tail(nj - std::max<int64_t>(visible, 0)).setConstant(ninf);
            online_softmax_row(s.row(r), acc.row(r), m[r], l[r]);
          }
          tile_add_nn(acc, s, vt, F(1));
        }
        Eigen::Map<RowMat<F>>(part_acc.data() + task * R * Dv, R, Dv) = acc;
        Eigen::Map<Vec<F>>(part_m.data() + task * R, R) = m;
        Eigen::Map<Vec<F>>(part_l.data() + task * R, R) = l;
      }
  // Merge the splits: out = sum_s acc_s e^(m_s - M) / sum_s l_s e^(m_s - M), lse = M + log(L).
  F* lse = k.out[1].data<F>();
#pragma omp parallel for collapse(2) schedule(static) if (B * Hk * R * Dv * splits >= (1 << 15))
  for (int64_t b = 0; b < B; ++b)
    for (int64_t hk = 0; hk < Hk; ++hk)
      for (int64_t r = 0; r < R; ++r) {
        const int64_t first = (b * Hk + hk) * splits;
        F M = ninf, L = 0;
        for (int64_t sp = 0; sp < splits; ++sp) M = std::max(M, part_m[size_t((first + sp) * R + r)]);
        Vec<F> o = Vec<F>::Zero(Dv);
        if (M != ninf)
          for (int64_t sp = 0; sp < splits; ++sp) {
            const size_t i = size_t((first + sp) * R + r);
            if (part_m[i] == ninf) continue;
            const F w = std::exp(part_m[i] - M);
            L += part_l[i] * w;
            o += w * Eigen::Map<const Vec<F>>(part_acc.data() + i * size_t(Dv), Dv);
          }
        const int64_t h = hk * group + r / T, t = r % T;
        auto dst = out_head<St>(k.out[0], b, h).row(t);
        const bool empty = L == F(0);  // a row that sees no key (causal with T > S)
        for (int64_t c = 0; c < Dv; ++c) dst(c) = St(empty ? F(0) : o[c] / L);
        lse[(b * H + h) * T + t] = empty ? ninf : M + std::log(L);
      }
}

#define QKV_ATTEND_DECODE(St)                                                                          \
  template void attend_decode<St, St>(const Heads&, const Heads&, const Heads&, const KernelArgs&,     \
                                      const AttentionAttrs&);                                          \
  template void attend_decode<St, int8_t>(const Heads&, const Heads&, const Heads&, const KernelArgs&, \
                                          const AttentionAttrs&);
QKV_ATTEND_DECODE(float)
QKV_ATTEND_DECODE(double)
QKV_ATTEND_DECODE(bf16)
QKV_ATTEND_DECODE(f16)
#undef QKV_ATTEND_DECODE

}  // namespace qkv::kernels::cpu::attention_tiles
