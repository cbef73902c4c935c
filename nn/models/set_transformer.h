// The set model of the anomaly task: element features [B, n, F] (dropped out with input_dropout
// while training) linearly embedded, pre-LN
// transformer blocks without any position embedding (so the model is permutation-equivariant;
// the (+) variants add the 2D scores over the n slots), and a per-element score [B, n].
#pragma once
#include <memory>
#include <vector>

#include "nn/models/block.h"

namespace qkv::nn {

struct SetTransformerConfig {
  int64_t features = 512;
  int64_t layers = 2;
  double mlp_ratio = 4.0;
  double dropout = 0.0;
  double input_dropout = 0.0;  // dropout on the element features before the embedding
  Activation activation = Activation::gelu;
  AttentionConfig attention;
};

class SetTransformer : public Module {
 public:
  explicit SetTransformer(const SetTransformerConfig& config, Generator* gen = nullptr);
  Tensor forward(const Tensor& features) const;  // [B, n, F] -> scores [B, n]

  Dropout input_dropout;
  Linear embed;
  std::vector<std::unique_ptr<TransformerBlock>> blocks;
  LayerNorm norm;
  Linear score;
};

}  // namespace qkv::nn
