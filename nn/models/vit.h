// Vision Transformer (Dosovitskiy et al.) as the study trains it from scratch: the image cut
// into p x p patches, each flattened and linearly embedded, a learned class token and learned
// position embedding, pre-LN transformer blocks with any attention variant (the (+) variants
// add the 2D positional scores over the patch sequence), a final LayerNorm and a linear head on
// the class token.
#pragma once
#include <memory>
#include <vector>

#include "nn/models/block.h"

namespace qkv::nn {

// [B, C, H, W] -> [B, (H/p)(W/p), C p p]: patches in row-major order, each flattened channel-
// first (C, then the p x p pixels), built from views and one copy. p must divide H and W.
Tensor patchify(const Tensor& images, int64_t patch);

struct ViTConfig {
  int64_t image_height = 28, image_width = 28, channels = 1;
  int64_t patch = 7;
  int64_t classes = 10;
  int64_t layers = 4;
  double mlp_ratio = 4.0;
  double dropout = 0.0;
  Activation activation = Activation::gelu;
  AttentionConfig attention;  // d_model, heads, kv_heads, sharing, pos2d (causal is off)
  int64_t patches() const { return (image_height / patch) * (image_width / patch); }
};

class ViT : public Module {
 public:
  explicit ViT(const ViTConfig& config, Generator* gen = nullptr);
  Tensor forward(const Tensor& images) const;  // [B, C, H, W] -> logits [B, classes]
  const ViTConfig& config() const { return config_; }

  Linear patch_embed;
  Tensor cls_token, pos_embed;  // [1, 1, d], [1, 1 + patches, d]
  std::vector<std::unique_ptr<TransformerBlock>> blocks;
  LayerNorm norm;
  Linear head;

 private:
  ViTConfig config_;
};

}  // namespace qkv::nn
