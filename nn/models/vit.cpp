#include "nn/models/vit.h"

#include "nn/init.h"

namespace qkv::nn {

Tensor patchify(const Tensor& x, int64_t p) {
  check<ShapeError>(x.dim() == 4, "patchify: expected images [batch, channels, height, width], got ",
                    shape_str(x.shape()));
  const int64_t B = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  check<ShapeError>(p > 0 && H % p == 0 && W % p == 0, "patchify: patch size ", p, " does not divide the ", H, "x", W,
                    " images");
  return x.reshape({B, C, H / p, p, W / p, p}).permute({0, 2, 4, 1, 3, 5}).reshape({B, (H / p) * (W / p), C * p * p});
}

namespace {
ViTConfig checked(const ViTConfig& c) {
  check<ValueError>(c.patch > 0 && c.image_height % c.patch == 0 && c.image_width % c.patch == 0, "vit: patch ",
                    c.patch, " must divide the image size ", c.image_height, "x", c.image_width);
  check<ValueError>(c.layers >= 1 && c.classes >= 1 && c.channels >= 1,
                    "vit: layers, classes and channels must be positive");
  return c;
}
}  // namespace

ViT::ViT(const ViTConfig& c, Generator* gen)
    : patch_embed(c.channels * c.patch * c.patch, c.attention.d_model, true, gen),
      norm(c.attention.d_model),
      head(c.attention.d_model, c.classes, true, gen),
      config_(checked(c)) {
  const int64_t d = c.attention.d_model;
  register_module("patch_embed", &patch_embed);
  cls_token = init_normal({1, 1, d}, 0.02, kCPU, gen);
  pos_embed = init_normal({1, 1 + c.patches(), d}, 0.02, kCPU, gen);
  register_parameter("cls_token", &cls_token);
  register_parameter("pos_embed", &pos_embed);
  const BlockConfig b = pre_norm_block_config(c.attention, c.mlp_ratio, c.activation, c.dropout);
  for (int64_t i = 0; i < c.layers; ++i) {
    blocks.push_back(std::make_unique<TransformerBlock>(b, gen));
    register_module("blocks." + std::to_string(i), blocks.back().get());
  }
  register_module("norm", &norm);
  register_module("head", &head);
}

Tensor ViT::forward(const Tensor& images) const {
  const ViTConfig& c = config_;
  check<ShapeError>(images.dim() == 4 && images.size(1) == c.channels && images.size(2) == c.image_height &&
                        images.size(3) == c.image_width,
                    "vit: expected images [batch, ", c.channels, ", ", c.image_height, ", ", c.image_width, "], got ",
                    shape_str(images.shape()));
  const int64_t B = images.size(0), d = c.attention.d_model;
  Tensor x = patch_embed.forward(patchify(images, c.patch));    // [B, N, d]
  x = concat({cls_token.expand({B, 1, d}), x}, 1) + pos_embed;  // [B, 1 + N, d]
  for (const auto& b : blocks) x = b->forward(x);
  return head.forward(norm.forward(x).select(1, 0));  // the class token
}

}  // namespace qkv::nn
