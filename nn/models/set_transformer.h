// The set model of the anomaly task: element features [B, n, F] linearly embedded, pre-LN
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
  Activation activation = Activation::gelu;
  AttentionConfig attention;
};

class SetTransformer : public Module {
 public:
  explicit SetTransformer(const SetTransformerConfig& config, Generator* gen = nullptr);
  Tensor forward(const Tensor& features) const;  // [B, n, F] -> scores [B, n]

  Linear embed;
  std::vector<std::unique_ptr<TransformerBlock>> blocks;
  LayerNorm norm;
  Linear score;
};

}  // namespace qkv::nn
