#include "lab/experiment/models.h"

namespace qkv::experiment {

namespace {
int64_t ffn_width(const ModelBase& m) { return int64_t(m.ffn_mult * m.d_model + 0.5); }
}  // namespace

nn::AttentionConfig attention_config(const ModelBase& m, const nn::Variant& variant, int pos2d_channels) {
  nn::AttentionConfig a;
  a.d_model = m.d_model;
  a.heads = m.heads;
  a.kv_heads = variant.kv_heads;
  a.v_rank = variant.v_rank;
  a.linear = variant.linear;
  a.sharing = variant.sharing;
  a.pos2d = variant.pos2d ? pos2d_channels : 0;
  return a;
}

nn::Activation activation(Activation a) {
  switch (a) {
    case Activation::relu: return nn::Activation::relu;
    case Activation::gelu: return nn::Activation::gelu;
    case Activation::gelu_tanh: return nn::Activation::gelu_tanh;
  }
  return nn::Activation::gelu;
}

nn::EncoderConfig encoder_config(const SyntheticConfig& c, const nn::Variant& variant) {
  nn::EncoderConfig e;
  e.vocab = c.task.vocab;
  e.classes = c.task.vocab;
  e.layers = c.model.layers;
  e.ffn_hidden = ffn_width(c.model);
  e.activation = activation(c.model.activation);
  e.pre_norm = c.model.norm == Norm::pre;
  e.dropout = c.model.dropout;
  e.mlp_head = c.model.head == HeadKind::mlp;
  e.attention = attention_config(c.model, variant, c.model.pos2d_channels);
  return e;
}

nn::ViTConfig vit_config(const VisionConfig& c, const nn::Variant& variant, int64_t height, int64_t width,
                         int64_t channels, int64_t classes) {
  nn::ViTConfig v;
  v.image_height = height;
  v.image_width = width;
  v.channels = channels;
  v.patch = c.model.patch;
  v.classes = classes;
  v.layers = c.model.layers;
  v.mlp_ratio = c.model.ffn_mult;
  v.dropout = c.model.dropout;
  v.activation = activation(c.model.activation);
  v.attention = attention_config(c.model, variant, c.model.pos2d_channels);
  check<ValueError>(height % v.patch == 0 && width % v.patch == 0, "model.patch: ", v.patch, " does not divide the ",
                    height, "x", width, " images of ", enum_name(c.data.dataset));
  return v;
}

nn::SetTransformerConfig set_transformer_config(const AnomalyConfig& c, const nn::Variant& variant, int64_t features) {
  nn::SetTransformerConfig m;
  m.features = features;
  m.layers = c.model.layers;
  m.mlp_ratio = c.model.ffn_mult;
  m.dropout = c.model.dropout;
  m.input_dropout = c.model.input_dropout;
  m.activation = activation(c.model.activation);
  m.attention = attention_config(c.model, variant, c.model.pos2d_channels);
  return m;
}

nn::GPTConfig gpt_config(const LmConfig& c, const nn::Variant& variant) {
  nn::GPTConfig g;
  g.vocab = c.model.vocab;
  g.context = c.model.context;
  g.layers = c.model.layers;
  g.ffn = ffn_width(c.model);
  g.dropout = c.model.dropout;
  g.activation = activation(c.model.activation);
  g.attention = attention_config(c.model, variant, 0);
  g.attention.causal = true;
  if (!c.model.llama()) return g;
  const GptModel& m = c.model;
  nn::RopeConfig rope;
  rope.theta = m.rope_theta;
  rope.fraction = m.rotary_fraction;
  rope.scaling = m.rope_scaling == RopeScalingName::linear   ? nn::RopeScaling::linear
                 : m.rope_scaling == RopeScalingName::llama3 ? nn::RopeScaling::llama3
                                                             : nn::RopeScaling::none;
  rope.factor = m.rope_factor;
  rope.low_freq_factor = m.rope_low_freq_factor;
  rope.high_freq_factor = m.rope_high_freq_factor;
  rope.original_context = m.rope_original_context;
  g = nn::llama_block(g, rope);
  g.attention.head_size = m.head_dim;
  g.attention.bias = m.attention_bias;
  g.mlp_bias = m.mlp_bias;
  g.tied_head = m.tie_embeddings;
  if (m.rms_norm_eps > 0) g.norm_eps = m.rms_norm_eps;
  return g;
}

}  // namespace qkv::experiment
