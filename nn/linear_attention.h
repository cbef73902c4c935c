// Linear attention (PAPER.md appendix): softmax replaced by a positive feature map
// phi(x) = elu(x) + 1, so that causal attention is a recurrence over a fixed-size state,
//   S_t = lambda S_{t-1} + phi(k_t) v_t^T,   n_t = lambda n_{t-1} + phi(k_t),
//   y_t = phi(q_t)^T S_t / (phi(q_t)^T n_t),
// per head (S [d_head, d_head], n [d_head]). With Q=K=V every one of q, k, v is z_t, the
// paper's form. The normalizer decays with S (the appendix writes it undecayed, which is the
// same at lambda = 1 and at lambda < 1 would let outputs shrink towards 0 with the context).
// Training uses the parallel form y = (A V) / (A 1), A = (phi(Q) phi(K)^T) * D with
// D_ts = lambda^(t - s) for s <= t; decoding carries (S, n) from chunk to chunk: memory and
// work per token do not grow with the context.
#pragma once
#include "tensor/tensor.h"

namespace qkv::nn {

Tensor positive_features(const Tensor& x);  // elu(x) + 1 = relu(x) + exp(-relu(-x))

// q, k [B, H, T, D], v [B, H, T, Dv] -> [B, H, T, Dv]. Not causal: every key, no decay.
Tensor linear_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, double decay);

// The next T positions given the state before them: state [B, H, D, Dv] and normalizer
// [B, H, 1, D] (zeros before the first position) are replaced by those after the last one, in
// place; returns the outputs [B, H, T, Dv], equal to the parallel form's on the whole sequence.
// A long chunk (a prompt) runs in blocks of 64 positions, so its memory is linear in T.
Tensor linear_attention_chunk(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& state,
                              const Tensor& normalizer, double decay);

}  // namespace qkv::nn
