// The transformer block shared by the models: attention and a feed-forward MLP, each with a
// residual connection and layer norm, either after the residual (post-LN, the synthetic tasks'
// earlier code) or before the sublayer (pre-LN, ViT and GPT).
#pragma once
#include "nn/attention.h"

namespace qkv::nn {

struct BlockConfig {
  AttentionConfig attention;
  int64_t ffn_hidden = 128;
  Activation activation = Activation::relu;
  double dropout = 0.1;
  bool pre_norm = false;
};

// The pre-LN, non-causal block of the ViT and the set transformer: an MLP mlp_ratio x d_model wide.
BlockConfig pre_norm_block_config(const AttentionConfig& a, double mlp_ratio, Activation act, double dropout);

class TransformerBlock : public Module {
 public:
  TransformerBlock(const BlockConfig& c, Generator* gen);
  Tensor forward(const Tensor& x) const;  // [B, T, d_model] -> [B, T, d_model]
  Attention attn;
  LayerNorm norm1, norm2;
  MLP ffn;
  Dropout drop;
  bool pre_norm;
};

}  // namespace qkv::nn
