#include "nn/models/set_transformer.h"

namespace qkv::nn {

SetTransformer::SetTransformer(const SetTransformerConfig& c, Generator* gen)
    : input_dropout(c.input_dropout, gen),
      embed(c.features, c.attention.d_model, true, gen),
      norm(c.attention.d_model),
      score(c.attention.d_model, 1, true, gen) {
  check<ValueError>(c.layers >= 1 && c.features >= 1, "set transformer: layers and features must be positive");
  register_module("input_dropout", &input_dropout);
  register_module("embed", &embed);
  const BlockConfig b = pre_norm_block_config(c.attention, c.mlp_ratio, c.activation, c.dropout);
  for (int64_t i = 0; i < c.layers; ++i) {
    blocks.push_back(std::make_unique<TransformerBlock>(b, gen));
    register_module("blocks." + std::to_string(i), blocks.back().get());
  }
  register_module("norm", &norm);
  register_module("score", &score);
}

Tensor SetTransformer::forward(const Tensor& features) const {
  check<ShapeError>(features.dim() == 3, "set transformer: expected features [batch, set size, features], got ",
                    shape_str(features.shape()));
  Tensor x = embed.forward(input_dropout.forward(features));
  for (const auto& b : blocks) x = b->forward(x);
  return score.forward(norm.forward(x)).squeeze(-1);
}

}  // namespace qkv::nn
