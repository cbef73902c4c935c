// Multi-head attention with pluggable projection sharing (PAPER.md section 1):
//   QKV     W_q, W_k, W_v   Q = XW_q, K = XW_k, V = XW_v
//   Q=K-V   W_qk, W_v       K is Q
//   Q-K=V   W_q, W_kv       V is K
//   Q=K=V   W_qkv           K and V are Q
// combined with head sharing (kv_heads: GQA, MQA; query heads form contiguous groups), the 2D
// positional scores of the (+) variants (pos2d channels m: S' = S sum(w) + P.w + b, per layer),
// and causal masking. A tied role is the same tensor as the role it is tied to, all the way into
// the fused attention op. Every projection has an output projection W_o beside it.
#pragma once
#include <map>
#include <memory>
#include <mutex>

#include "nn/layers.h"

namespace qkv::nn {

class KVCache;

enum class Sharing { qkv, qk_v, q_kv, all };   // QKV, Q=K-V, Q-K=V, Q=K=V

// Accepts the paper's names (QKV, Q=K-V, Q-K=V, Q=K=V) and the official code's aliases
// (qkv, qk, kv, k); throws ValueError listing them otherwise.
Sharing parse_sharing(const std::string& name);
const char* sharing_name(Sharing s);
bool ties_q_and_k(Sharing s);
bool ties_k_and_v(Sharing s);

struct AttentionConfig {
  int64_t d_model = 64;
  int64_t heads = 4;
  int64_t kv_heads = 0;      // 0: as many as heads (MHA); 1: MQA; g: GQA-g
  Sharing sharing = Sharing::qkv;
  int64_t pos2d = 0;         // channels m of the 2D positional scores; 0: off
  bool causal = false;
  bool bias = true;          // biases on the projections

  int64_t head_dim() const { return d_model / heads; }
  int64_t kv_head_count() const { return kv_heads == 0 ? heads : kv_heads; }
  void validate() const;     // throws ValueError naming the bad combination
};

class Attention : public Module {
 public:
  explicit Attention(const AttentionConfig& config, Generator* gen = nullptr);

  // x [B, T, d_model] -> [B, T, d_model].
  Tensor forward(const Tensor& x) const;

  // Incremental decoding (causal): x [B, T, d_model] holds the next T positions. Their keys
  // (and values, unless V is tied to K) go into `cache` layer `layer` after the positions
  // already there, and their queries attend to every cached position and causally to each
  // other. The caller advances the cache once all layers have run.
  Tensor forward_cached(const Tensor& x, KVCache& cache, int64_t layer) const;

  // The pieces, for tests, analysis and plots.
  struct Heads { Tensor q, k, v; };   // q [B, H, T, dh]; k, v [B, Hk, T, dh]; tied roles share
  Heads project(const Tensor& x) const;
  Tensor scores(const Tensor& x) const;         // S' [B, H, T, T] before masking (with 2D scores)
  Tensor probabilities(const Tensor& x) const;  // softmax of the masked scores [B, H, T, T]

  const AttentionConfig& config() const { return config_; }
  // Projections this variant owns (null where the role is tied to another).
  std::unique_ptr<Linear> q, k, v, qk, kv, qkv;
  Linear o;
  Tensor pos2d_weight, pos2d_bias;   // [m] and [1], when pos2d > 0

 private:
  // The 2D score bias [T, T] = P.w + b and the score multiplier sum(w).
  std::pair<Tensor, Tensor> pos2d_terms(int64_t T) const;
  Tensor split_heads(const Tensor& x, int64_t heads) const;   // [B, T, h*dh] -> [B, h, T, dh]
  AttentionConfig config_;
  mutable std::mutex table_mu_;
  mutable std::map<int64_t, Tensor> pos2d_tables_;   // P by sequence length, on the weights' device
};

}  // namespace qkv::nn
