// Fused scaled-dot-product attention on the CPU, tiled with an online softmax (the
// FlashAttention scheme): the [T, S] probability matrix of a head is never materialized, only
// one [64, 64] tile of it at a time. K and V may be the same tensor (K=V sharing), query heads
// share KV heads in contiguous groups (GQA / MQA), an additive [T, S] bias carries the 2D
// positional scores, and causal masking is aligned to the bottom-right (query i sees keys
// j <= i + S - T), which is what incremental decoding needs. The forward reads bf16/f16 operands
// (a 16-bit KV cache) in place, a tile at a time; the backward takes float32/64 (its row widens).
#include "kernels/cpu/attention_tiles.h"

namespace qkv::kernels::cpu {
namespace {

using namespace attention_tiles;

constexpr int64_t kBiasChunks = 32;  // bias-gradient partial sums (attention_backward)

// The forward of both entry points: queries stored as St, keys and values as Kv (St, or int8
// with scales), computed in compute_t<St>.
template <class St, class Kv>
void attend(const Heads& Q, const Heads& K, const Heads& V, const Tensor& bias_in, const KernelArgs& k,
            const AttentionAttrs& a) {
  using F = compute_t<St>;
  const bool kv_shared = reads_once(K, V);
  const int64_t B = Q.t.shape()[0], H = Q.heads, Hk = K.heads, T = Q.rows, S = K.rows, Dv = V.cols;
  const int64_t group = H / Hk, qblocks = (T + kBlockQ - 1) / kBlockQ;
  const Tensor bias = bias_in.defined() ? raw::to(raw::contiguous(bias_in), dtype_of<F>(), kCPU) : Tensor();
  F* lse = k.out[1].data<F>();
  const F* bp = bias.defined() ? bias.data<F>() : nullptr;
  const F scale = F(a.scale), ninf = -std::numeric_limits<F>::infinity();
#pragma omp parallel for collapse(3) schedule(dynamic, 1) if (B * H * T * S * Dv >= (1 << 16))
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t qb = 0; qb < qblocks; ++qb) {
        const int64_t i0 = qb * kBlockQ, ni = std::min(kBlockQ, T - i0);
        const int64_t kend = visible_keys(i0 + ni - 1, T, S, a.causal);
        RowMat<F> qbuf, kbuf, vbuf;  // used for 16-bit and int8 storage only
        const ConstMap<F> q = rows_of<F, St>(Q, b, h, i0, ni, qbuf);
        RowMat<F> acc = RowMat<F>::Zero(ni, Dv), s(ni, kBlockK);
        Vec<F> m = Vec<F>::Constant(ni, ninf), l = Vec<F>::Zero(ni);
        for (int64_t j0 = 0; j0 < kend; j0 += kBlockK) {
          const int64_t nj = std::min(kBlockK, kend - j0);
          const ConstMap<F> kt = rows_of<F, Kv>(K, b, h / group, j0, nj, kbuf);
          const ConstMap<F> vt = kv_shared ? kt : rows_of<F, Kv>(V, b, h / group, j0, nj, vbuf);  // K=V: once
          scores_of<F>(s, q, kt, i0, j0, scale, bp, S, T, a.causal);
          for (int64_t r = 0; r < ni; ++r) online_softmax_row(s.row(r), acc.row(r), m[r], l[r]);
          tile_add_nn(acc, s, vt, F(1));
        }
        MutMap<St> o = out_head<St>(k.out[0], b, h);
        F* L = lse + (b * H + h) * T + i0;
        for (int64_t r = 0; r < ni; ++r) {
          const bool empty = l[r] == F(0);  // a row that sees no key (causal with T > S)
          const F inv = empty ? F(0) : F(1) / l[r];
          for (int64_t c = 0; c < Dv; ++c) o(i0 + r, c) = St(acc(r, c) * inv);
          L[r] = empty ? ninf : m[r] + std::log(l[r]);
        }
      }
}

}  // namespace

// Inputs (q [B,H,T,D], k [B,Hk,S,D], v [B,Hk,S,Dv], bias? [T,S]) -> (out [B,H,T,Dv], lse [B,H,T]).
// bf16/f16 operands are read tile by tile into float32 and computed in float32; their output is
// rounded once, and their lse is float32.
void attention(const KernelArgs& k) {
  const auto& a = attr<AttentionAttrs>(k.attrs, "attention");
  const Heads Q(k.in[0]), K(k.in[1]), V(k.in[2]);
  const bool decode = !k.in[3].defined() && is_decode_shape(Q, K);
  visit_any_float(Q.t.dtype(), "attention", [&]<class St>() {
    if (decode) attend_decode<St, St>(Q, K, V, k, a);
    else attend<St, St>(Q, K, V, k.in[3], k, a);
  });
}

void attention_over_cache(const Tensor& q, const CacheOperand& keys, const CacheOperand& values, const Tensor& cos,
                          const Tensor& sin, const KernelArgs& k) {
  const auto& a = attr<AttentionAttrs>(k.attrs, "cache_attention");
  const Heads Q(q), V(values.rows, values.scales);
  Heads K(keys.rows, keys.scales);
  const bool decode = is_decode_shape(Q, K);
  visit_any_float(Q.t.dtype(), "cache_attention", [&]<class St>() {
    using F = compute_t<St>;
    if (cos.defined()) {
      K.cos = raw::contiguous(raw::to(cos, dtype_of<F>(), kCPU));
      K.sin = raw::contiguous(raw::to(sin, dtype_of<F>(), kCPU));
    }
    auto run = [&]<class Kv>() {
      if (decode) attend_decode<St, Kv>(Q, K, V, k, a);
      else attend<St, Kv>(Q, K, V, Tensor(), k, a);
    };
    if (K.t.dtype() == DType::i8) run.template operator()<int8_t>();
    else run.template operator()<St>();
  });
}

// Inputs (grad_out, q, k, v, bias?, out, lse) -> (dq, dk, dv, dbias). Recomputes each score
// tile from q, k and the saved log-sum-exp; one task per (batch, KV head) owns that head's dk
// and dv and its query heads' dq, so no two threads write the same gradient row.
void attention_backward(const KernelArgs& k) {
  const auto& a = attr<AttentionAttrs>(k.attrs, "attention_backward");
  // The gradient and the output are read in place, heads within tokens or not.
  const Heads G(k.in[0]), Q(k.in[1]), K(k.in[2]), V(k.in[3]), O(k.in[5]);
  const Tensor bias = k.in[4].defined() ? raw::contiguous(k.in[4]) : Tensor();
  const Tensor LSE = raw::contiguous(k.in[6]);
  const int64_t B = Q.t.shape()[0], H = Q.heads, Hk = K.heads, T = Q.rows, S = K.rows, D = Q.cols;
  const int64_t group = H / Hk;
  visit_float(Q.t.dtype(), "attention_backward", [&]<class F>() {
    const F* lp = LSE.data<F>();
    const F* bp = bias.defined() ? bias.data<F>() : nullptr;
    const F scale = F(a.scale), ninf = -std::numeric_limits<F>::infinity();
    const bool parallel = B * H * T * S * D >= (1 << 16);
    // The bias gradient sums dS over every (batch, KV head) task. Tasks are cut into a fixed
    // number of chunks, each summing its tasks in order into its own buffer, and the buffers are
    // added in chunk order: the same bits whatever the thread count and the schedule.
    const int64_t tasks = B * Hk, chunks = bp ? std::min<int64_t>(tasks, kBiasChunks) : tasks;
    std::vector<RowMat<F>> dbias_part(bp ? size_t(chunks) : 0, RowMat<F>::Zero(T, S));
#pragma omp parallel for schedule(dynamic, 1) if (parallel)
    for (int64_t c = 0; c < chunks; ++c)
      for (int64_t t = c * tasks / chunks; t < (c + 1) * tasks / chunks; ++t) {
        const int64_t b = t / Hk, hk = t % Hk;
        const ConstMap<F> kk = K.head<F>(b, hk), v = V.head<F>(b, hk);
        MutMap<F> dK = out_head<F>(k.out[1], b, hk), dV = out_head<F>(k.out[2], b, hk);
        dK.setZero();
        dV.setZero();
        RowMat<F> p, dp;
        Vec<F> delta(T);
        for (int64_t h = hk * group; h < (hk + 1) * group; ++h) {
          const ConstMap<F> q = Q.head<F>(b, h);
          const ConstMap<F> dO = G.head<F>(b, h), o = O.head<F>(b, h);
          // delta_i = <dO_i, O_i>, the softmax backward's row term: read here, where dO is read
          // next, rather than in a pass of its own over every head.
          for (int64_t i = 0; i < T; ++i) delta[i] = dO.row(i).dot(o.row(i));
          MutMap<F> dQ = out_head<F>(k.out[0], b, h);
          dQ.setZero();
          const F* L = lp + (b * H + h) * T;
          for (int64_t i0 = 0; i0 < T; i0 += kBlockQ) {
            const int64_t ni = std::min(kBlockQ, T - i0);
            const int64_t kend = visible_keys(i0 + ni - 1, T, S, a.causal);
            for (int64_t j0 = 0; j0 < kend; j0 += kBlockK) {
              const int64_t nj = std::min(kBlockK, kend - j0);
              tile_scores<F>(p, q, kk, i0, ni, j0, nj, scale, bp, S, T, a.causal);
              for (int64_t r = 0; r < ni; ++r) {
                const F lse_r = L[i0 + r];
                with_score_row(p.row(r), [&](auto& x) {
                  if (lse_r == ninf) x.setZero();  // the row saw no key
                  else x = (x - lse_r).exp();
                });
              }
              tile_add_tn(dV.middleRows(j0, nj), p, dO.middleRows(i0, ni), F(1));
              tile_product_nt(dp, dO.middleRows(i0, ni), v.middleRows(j0, nj), F(1));
              for (int64_t r = 0; r < ni; ++r) {  // p becomes dS = p (dp - delta), the scores' gradient
                const F delta_r = delta[i0 + r];
                auto dp_r = dp.row(r).array();
                with_score_row(p.row(r), [&](auto& x) { x *= dp_r - delta_r; });
              }
              tile_add_nn(dQ.middleRows(i0, ni), p, kk.middleRows(j0, nj), scale);
              tile_add_tn(dK.middleRows(j0, nj), p, q.middleRows(i0, ni), scale);
              if (bp) dbias_part[size_t(c)].block(i0, j0, ni, nj) += p;
            }
          }
        }
      }
    if (bp) {
      MutMap<F> dB(k.out[3].data<F>(), T, S, Eigen::OuterStride<>(S));
      dB.setZero();
      for (const auto& part : dbias_part) dB += part;
    }
  });
}

}  // namespace qkv::kernels::cpu
