#include "nn/models/encoder.h"

#include "nn/position.h"

namespace qkv::nn {

ClassifierHead::ClassifierHead(int64_t dim, int64_t classes, bool mlp, double dropout, Generator* gen)
    : out(dim, classes, true, gen) {
  if (mlp) {
    fc = std::make_unique<Linear>(dim, dim, true, gen);
    norm = std::make_unique<LayerNorm>(dim);
    drop = std::make_unique<Dropout>(dropout, gen);
    register_module("fc", fc.get());
    register_module("norm", norm.get());
    register_module("drop", drop.get());
  }
  register_module("out", &out);
}

Tensor ClassifierHead::forward(const Tensor& x) const {
  if (!fc) return out.forward(x);
  return out.forward(drop->after_relu(norm->forward(fc->forward(x))));
}

namespace {
EncoderConfig checked(EncoderConfig c) {
  c.attention.causal = false;
  c.attention.validate();
  check<ValueError>(c.vocab >= 1 && c.classes >= 1 && c.layers >= 1 && c.ffn_hidden >= 1, "encoder: vocab ", c.vocab,
                    ", classes ", c.classes, ", layers ", c.layers, " and ffn_hidden ", c.ffn_hidden,
                    " must be positive");
  return c;
}
}  // namespace

Encoder::Encoder(const EncoderConfig& config, Generator* gen)
    : input(config.vocab, config.attention.d_model, true, gen),
      head(config.attention.d_model, config.classes, config.mlp_head, config.dropout, gen),
      config_(checked(config)) {
  register_module("input", &input);
  for (int64_t i = 0; i < config_.layers; ++i) {
    BlockConfig b;
    b.attention = config_.attention;
    b.ffn_hidden = config_.ffn_hidden;
    b.activation = config_.activation;
    b.dropout = config_.dropout;
    b.pre_norm = config_.pre_norm;
    blocks.push_back(std::make_unique<TransformerBlock>(b, gen));
    register_module("blocks." + std::to_string(i), blocks.back().get());
  }
  if (config_.pre_norm) {
    final_norm = std::make_unique<LayerNorm>(config_.attention.d_model);
    register_module("final_norm", final_norm.get());
  }
  register_module("head", &head);
}

Tensor Encoder::positions(int64_t T, const Device& device) const {
  std::lock_guard lock(pe_mu_);
  Tensor& pe = pe_[T];
  if (!pe.defined() || pe.device() != device) pe = sinusoidal_table(T, config_.attention.d_model).to(device);
  return pe;
}

// one_hot(ids) W^T + b, computed as a row lookup of W^T.
Tensor Encoder::embed(const Tensor& ids) const {
  check<ShapeError>(ids.dim() == 2, "encoder: expected token ids [batch, len], got ", shape_str(ids.shape()));
  Tensor x = embedding(input.weight.transpose(0, 1), ids) + input.bias;
  return x + positions(ids.size(1), x.device());
}

Tensor Encoder::hidden_before(const Tensor& ids, int64_t layer) const {
  check<IndexError>(layer >= 0 && layer < int64_t(blocks.size()), "encoder: layer ", layer, " out of range");
  Tensor x = embed(ids);
  for (int64_t i = 0; i < layer; ++i) x = blocks[size_t(i)]->forward(x);
  return x;
}

Tensor Encoder::forward(const Tensor& ids) const {
  Tensor x = embed(ids);
  for (const auto& b : blocks) x = b->forward(x);
  if (final_norm) x = final_norm->forward(x);
  return head.forward(x);
}

}  // namespace qkv::nn
