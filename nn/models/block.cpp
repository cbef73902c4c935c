#include "nn/models/block.h"

namespace qkv::nn {

BlockConfig pre_norm_block_config(const AttentionConfig& a, double mlp_ratio, Activation act, double dropout) {
  BlockConfig b;
  b.attention = a;
  b.attention.causal = false;
  b.ffn_hidden = int64_t(mlp_ratio * double(a.d_model) + 0.5);
  b.activation = act;
  b.dropout = dropout;
  b.pre_norm = true;
  return b;
}

TransformerBlock::TransformerBlock(const BlockConfig& c, Generator* gen)
    : attn(c.attention, gen),
      norm1(c.attention.d_model),
      norm2(c.attention.d_model),
      ffn(c.attention.d_model, c.ffn_hidden, c.activation, c.dropout, gen),
      drop(c.dropout, gen),
      pre_norm(c.pre_norm) {
  register_module("attn", &attn);
  register_module("norm1", &norm1);
  register_module("ffn", &ffn);
  register_module("norm2", &norm2);
  register_module("drop", &drop);
}

// Each "x + dropout(y)" that a layer norm reads is one fused op (dropout_add_layer_norm): one
// pass over the rows instead of dropout, add and norm each reading and writing them. It draws
// the random numbers the unfused dropout would.
Tensor TransformerBlock::forward(const Tensor& x) const {
  if (pre_norm) {
    const AddNorm h = drop.add_norm(x, attn.forward(norm1.forward(x)), norm2);  // h, norm2(h)
    return h.sum + drop.forward(ffn.forward(h.normed));
  }
  const Tensor h = drop.add_norm(x, attn.forward(x), norm1).normed;
  return drop.add_norm(h, ffn.forward(h), norm2).normed;
}

}  // namespace qkv::nn
