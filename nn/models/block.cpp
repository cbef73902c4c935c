#include "nn/models/block.h"

namespace qkv::nn {

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

Tensor TransformerBlock::forward(const Tensor& x) const {
  if (pre_norm) {
    Tensor h = x + drop.forward(attn.forward(norm1.forward(x)));
    return h + drop.forward(ffn.forward(norm2.forward(h)));
  }
  Tensor h = norm1.forward(x + drop.forward(attn.forward(x)));
  return norm2.forward(h + drop.forward(ffn.forward(h)));
}

}  // namespace qkv::nn
