// Multi-head attention with pluggable projection sharing (PAPER.md section 1), built from the
// sharing table (nn/sharing.h): one Linear per slot of the pattern's row, named after it,
//   QKV     q, k, v     Q = XW_q, K = XW_k, V = XW_v
//   Q=K-V   qk, v       K is Q
//   Q-K=V   q, kv       V is K
//   Q=K=V   qkv         K and V are Q
// combined with head sharing (kv_heads: GQA, MQA; query heads form contiguous groups), the 2D
// positional scores of the (+) variants (pos2d channels m: S' = S sum(w) + P.w + b, per layer),
// and causal masking. A tied role is the same tensor as the role it is tied to, all the way into
// the fused attention op. Every projection has an output projection W_o beside it.
//
// The low-rank V residual (v_rank r > 0, rows whose V is K): V = K + (X A) B per KV head, with
// A = v_down [d -> Hk r] and B = v_up [Hk, r, d_head]. Training materializes V; a KV cache
// stores each position's row [K | X A] (d_head + r wide) once, and attention reads it as keys
// (its first d_head columns) and as values (all of it), so the output [P K | P X A] is finished
// by the small product P X A B: the cache is read once and V is never formed for the prefix.
//
// `linear`: the appendix's linear attention (nn/linear_attention.h) in place of softmax, in
// parallel form for training and as a recurrence over a fixed-size state for decoding.
//
// `rope`: rotary positions (nn/rope.h) on the roles Q and K, never on V. A slot serving K and V
// computes s = X W once: the key is RoPE(s) and the value s, so K=V stays one projection and,
// in a KV cache, one tensor: the cache stores s, and decoding turns each cached key as it reads
// it (cache_attention's rotary tables). Other rows cache their keys turned. A slot serving Q and
// K (Q=K-V, Q=K=V) is turned once for both.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include "nn/layers.h"
#include "nn/rope.h"
#include "nn/sharing.h"

namespace qkv::nn {

class KVCache;

struct AttentionConfig {
  int64_t d_model = 64;
  int64_t heads = 4;
  int64_t kv_heads = 0;  // 0: as many as heads (MHA); 1: MQA; g: GQA-g
  Sharing sharing = Sharing::qkv;
  int64_t pos2d = 0;  // channels m of the 2D positional scores; 0: off
  bool causal = false;
  bool bias = true;    // biases on the projections
  int64_t v_rank = 0;  // the low-rank V residual's rank r per KV head (1..head_dim); 0: none
  // Linear attention (nn/linear_attention.h) instead of softmax: phi(q) phi(k)^T, causal with
  // the decay lambda; a KV cache then holds the recurrent state, not rows per position.
  bool linear = false;
  double linear_decay = 1.0;
  int64_t head_size = 0;           // the head dim; 0: d_model / heads
  std::optional<RopeConfig> rope;  // rotary positions on Q and K; none: the model places tokens itself

  int64_t head_dim() const { return head_size > 0 ? head_size : d_model / heads; }
  int64_t query_width() const { return heads * head_dim(); }  // W_q's outputs, W_o's inputs
  int64_t kv_head_count() const { return kv_heads == 0 ? heads : kv_heads; }
  // Width of one cached row per KV head: d_head, plus r for the low-rank V residual's X A.
  int64_t cache_row_width() const { return head_dim() + v_rank; }
  const SharingPattern& pattern() const { return sharing_pattern(sharing); }
  void validate() const;  // throws ValueError naming the bad combination
};

// Where the T tokens an attention reads are: from position `first`, or (`start` defined: one
// int64 on the device, as decode_step reads it) from the position it holds, within the first
// `capacity`.
struct TokenPositions {
  int64_t first = 0;
  Tensor start;
  int64_t capacity = 0;
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
  // The same with the new positions' first one in `start` (one int64 on x's device), read on
  // the device (KVCache::write_at, cache_attention): the step is the same kernels at every
  // position. The cache's length() is neither read nor advanced.
  Tensor decode_step(const Tensor& x, KVCache& cache, int64_t layer, const Tensor& start) const;

  // The pieces, for tests, analysis and plots.
  struct Heads {
    Tensor q, k, v;
  };                                            // q [B, H, T, dh]; k, v [B, Hk, T, dh]; tied roles share
  Heads project(const Tensor& x) const;         // with the low-rank residual, V = K + (X A) B
  Tensor scores(const Tensor& x) const;         // S' [B, H, T, T] before masking (with 2D scores)
  Tensor probabilities(const Tensor& x) const;  // softmax of the masked scores [B, H, T, T]

  const AttentionConfig& config() const { return config_; }
  // Whether a KV cache stores this layer's keys unrotated, turned as they are read: RoPE with K=V.
  bool keys_turned_on_read() const { return config_.rope && config_.pattern().ties(Role::k, Role::v); }
  // cos and sin of positions [0, rows) (at least; shared by every call) on `device`.
  RotaryTables rotary(int64_t rows, const Device& device) const;
  // The projection serving `role`; tied roles get the same Linear.
  Linear& projection(Role role) const { return *slots_[size_t(config_.pattern().slot_index(role))]; }
  Linear o;
  Tensor pos2d_weight, pos2d_bias;  // [m] and [1], when pos2d > 0
  std::unique_ptr<Linear> v_down;   // A: d -> Hk r, when v_rank > 0
  Tensor v_up;                      // B: [Hk, r, d_head], when v_rank > 0

 private:
  // The 2D score bias [T, T] = P.w + b and the score multiplier sum(w).
  std::pair<Tensor, Tensor> pos2d_terms(int64_t T) const;
  // [B, T, h*w] -> [B, h, T, w], w the head dim unless given.
  Tensor split_heads(const Tensor& x, int64_t heads, int64_t width = 0) const;
  Heads project_slots(const Tensor& x, const TokenPositions& at = {}) const;  // project() without the V residual
  // The cached rows [B, Hk, T, dh (+ r)]: K, or [K | X A] with the low-rank V residual.
  Tensor cache_rows(const Tensor& x, const Heads& h) const;
  // Attention's output [B, H, T, dh] from one over cached rows: as it is, or with the residual,
  // y[..., :dh] + y[..., dh:] B.
  Tensor finish_residual(const Tensor& y) const;
  Tensor merge_heads(const Tensor& y) const;  // [B, H, T, dh] -> W_o of [B, T, d]
  // Linear attention's cached step: the next positions over the layer's carried state.
  Tensor linear_step(const Tensor& x, KVCache& cache, int64_t layer) const;
  AttentionConfig config_;
  std::vector<std::unique_ptr<Linear>> slots_;  // one per distinct slot of the pattern's row
  mutable std::mutex table_mu_;
  mutable std::map<int64_t, Tensor> pos2d_tables_;                    // P by sequence length, on the weights' device
  mutable std::vector<std::pair<Device, RotaryTables>> rope_tables_;  // per device, grown to need
};

// Sees the input x of every Attention::forward on this thread while alive: how analyses read
// each layer's attention input without copying a model's forward. Nests; the innermost sees
// the calls.
class AttentionInputProbe {
 public:
  using Callback = std::function<void(const Attention& attention, const Tensor& x)>;
  explicit AttentionInputProbe(Callback callback);
  ~AttentionInputProbe();
  AttentionInputProbe(const AttentionInputProbe&) = delete;
  AttentionInputProbe& operator=(const AttentionInputProbe&) = delete;
  // Called by Attention::forward; nothing without a probe.
  static void notify(const Attention& attention, const Tensor& x);

 private:
  Callback callback_;
  AttentionInputProbe* outer_;
};

}  // namespace qkv::nn
