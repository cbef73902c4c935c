// GPT as the study's official language-model code defines it (GPT-2 style): token and learned
// absolute position embeddings, pre-LN blocks (LayerNorm eps 1e-5) of causal attention with any
// projection- and head-sharing variant (QKV, Q-K=V, Q=K-V, Q=K=V, GQA-g, MQA, Q-GQA-g, Q-MQA)
// and an exact-GELU MLP, residual dropout after each sublayer, a final LayerNorm and an output
// layer tied to the token embedding. Every Linear has a bias; weights and embeddings start
// N(0, 0.02), biases 0. Decoding runs the same weights incrementally over a KVCache.
//
// The same decoder in today's Llama form (llama_block below): rotary positions on Q and K
// (attention.rope) instead of the position table, RMS norms, a SwiGLU MLP (silu(x W_gate) *
// x W_up, then W_down), biases optional, the output layer tied or its own, the head dim free of
// d_model / heads. Every sharing variant works on either form.
#pragma once
#include <memory>
#include <vector>

#include "nn/kv_cache.h"
#include "nn/layers.h"
#include "nn/rope.h"

namespace qkv::nn {

// The MLP: act(x W_fc) W_proj, or the SwiGLU gate silu(x W_gate) * (x W_up) W_down (one Linear
// fc of 2 ffn outputs, the gate's first).
enum class MlpKind : uint8_t { plain, swiglu };

struct GPTConfig {
  int64_t vocab = 50304;   // GPT-2's 50257 padded to a multiple of 64
  int64_t context = 1024;  // positions the model has embeddings for
  int64_t layers = 12;
  int64_t ffn = 0;       // MLP width; 0: 4 d_model
  double dropout = 0.1;  // residual dropout
  double init_std = 0.02;
  Activation activation = Activation::gelu;  // the MLP's; gelu_tanh is GPT-2's gelu_new
  AttentionConfig attention;                 // d_model, heads, kv_heads, sharing (always causal, no 2D scores)
  NormKind norm = NormKind::layer;           // the blocks' and the final norm
  double norm_eps = 1e-5;
  MlpKind mlp = MlpKind::plain;
  bool mlp_bias = true;   // biases on the MLP's Linears (attention.bias: on the attention's)
  bool tied_head = true;  // the output layer is the token embedding; else a Linear of its own

  int64_t d_model() const { return attention.d_model; }
  // A table of learned positions (GPT-2); rotary positions (attention.rope) have none.
  bool learned_positions() const { return !attention.rope; }
  int64_t ffn_width() const { return ffn > 0 ? ffn : 4 * attention.d_model; }
  void validate() const;  // ValueError naming the bad field
};

// The Llama form of `c`: RMS norms (eps 1e-6), rotary positions, the SwiGLU MLP, no biases;
// the head stays as c has it (tied_head).
GPTConfig llama_block(GPTConfig c, const RopeConfig& rope = {});

// Closed forms, no model built: parameters (tied head counted once) and multiply-accumulates of
// one forward pass over a sequence of n tokens (PAPER.md: projections p n d^2, scores and
// mixing 2 n^2 d, output n d^2, MLP 2 n d d_ff, LM head n d V), per sequence. The low-rank V
// residual adds its A and B to the projections (n d Hk r + n Hk r dh MACs).
int64_t gpt_parameter_count(const GPTConfig& c);
int64_t gpt_attention_parameter_count(const GPTConfig& c);  // one layer: projections and W_o
struct GPTMacs {
  int64_t projections = 0, attention = 0, output = 0, mlp = 0, head = 0;
  int64_t total() const { return projections + attention + output + mlp + head; }
};
GPTMacs gpt_macs(const GPTConfig& c, int64_t n);

class GPTBlock : public Module {
 public:
  GPTBlock(const GPTConfig& c, Generator* gen);
  // The block on the residual stream x given n = ln1(x): its output and `next` of it (the next
  // block's ln1, or ln_f). Each residual add is one op with the layer norm that reads it.
  AddNorm forward(const Tensor& x, const Tensor& n, const LayerNorm& next) const;
  // The block's output alone, for walking the residual stream one block at a time.
  Tensor forward(const Tensor& x) const;
  Tensor forward_cached(const Tensor& x, KVCache& cache, int64_t layer) const;
  Tensor decode_step(const Tensor& x, KVCache& cache, int64_t layer, const Tensor& start) const;
  LayerNorm ln1;
  Attention attn;
  LayerNorm ln2;
  Linear fc, proj;
  Dropout drop;

 private:
  Tensor mlp(const Tensor& x) const;
  Activation activation_;
  MlpKind mlp_kind_;
};

class GPT : public Module {
 public:
  explicit GPT(const GPTConfig& config, Generator* gen = nullptr);
  // ids [B, T] (int64, T <= context) -> logits [B, T, vocab].
  Tensor forward(const Tensor& ids) const;
  // Mean cross-entropy of the next-token logits against targets [B, T]; targets of -100 add
  // nothing.
  Tensor loss(const Tensor& ids, const Tensor& targets) const;
  // A cache for `batch` sequences of up to `capacity` positions (0: the context), on the
  // model's device.
  KVCache make_cache(int64_t batch, int64_t capacity = 0, DType dtype = DType::f32) const;
  // The rotary tables of positions [0, positions) on the model's device (none without rotary
  // positions): model state, made by make_cache, and before whatever measures the cache alone.
  void prepare_rotary(int64_t positions) const;
  // The next positions of the sequences in `cache`: ids [B, T] -> logits [B, T, vocab]; the
  // cache then holds them too. Prefill is the first call; decoding feeds one token at a time.
  Tensor forward_cached(const Tensor& ids, KVCache& cache) const;
  // forward_cached with the positions on the device: ids [B, T] at positions [T] (int64,
  // consecutive, on the model's device) -> logits [B, T, vocab]. Every position is read on the
  // device, so the step's kernels and arguments do not change from one position to the next
  // and a CUDA graph of it replays at any (lab/infer). cache.length() is neither read nor
  // advanced: the caller keeps the positions.
  Tensor decode_step(const Tensor& ids, const Tensor& positions, KVCache& cache) const;
  const GPTConfig& config() const { return config_; }
  // The tokens ids [B, T] at positions start.. as the first block reads them [B, T, d]: their
  // embeddings, plus the learned positions' where the model has them.
  Tensor embed(const Tensor& ids, int64_t start) const;

  Embedding wte;
  std::unique_ptr<Embedding> wpe;  // learned positions; none under rotary positions
  std::vector<std::unique_ptr<GPTBlock>> blocks;
  LayerNorm ln_f;
  std::unique_ptr<Linear> lm_head;  // the output layer when not tied to wte

 private:
  Tensor logits(const Tensor& normed) const;  // ln_f's output -> logits
  GPTConfig config_;
};

}  // namespace qkv::nn
