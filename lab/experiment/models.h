// The model each family's config describes: the nn configuration built from its model section
// and the run's variant (projection sharing, KV heads, 2D scores). Runners, reports and
// inference all build their models through these.
#pragma once
#include "lab/experiment/families.h"
#include "nn/models/encoder.h"
#include "nn/models/gpt.h"
#include "nn/models/set_transformer.h"
#include "nn/models/vit.h"

namespace qkv::experiment {

// The attention of a model section under `variant`; 2D scores get `pos2d_channels` channels.
nn::AttentionConfig attention_config(const ModelBase& m, const nn::Variant& variant, int pos2d_channels);
nn::Activation activation(Activation a);

nn::EncoderConfig encoder_config(const SyntheticConfig& c, const nn::Variant& variant);
// ValueError when model.patch does not divide the images.
nn::ViTConfig vit_config(const VisionConfig& c, const nn::Variant& variant, int64_t height, int64_t width,
                         int64_t channels, int64_t classes);
nn::SetTransformerConfig set_transformer_config(const AnomalyConfig& c, const nn::Variant& variant, int64_t features);
nn::GPTConfig gpt_config(const LmConfig& c, const nn::Variant& variant);

}  // namespace qkv::experiment
