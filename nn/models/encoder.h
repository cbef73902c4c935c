// The encoder of the synthetic tasks (PAPER.md, "Synthetic"): one-hot tokens through a linear
// input layer, sinusoidal 1D positions added, a stack of transformer blocks (post-LN as the
// earlier code, or pre-LN) without a causal mask, and a per-token classification head
// (Linear-LayerNorm-ReLU-Dropout-Linear, or a single Linear).
#pragma once
#include <map>
#include <memory>
#include <vector>

#include "nn/models/block.h"

namespace qkv::nn {

struct EncoderConfig {
  int64_t vocab = 10;    // input symbols (one-hot width)
  int64_t classes = 10;  // output classes per position
  int64_t layers = 2;
  int64_t ffn_hidden = 128;
  Activation activation = Activation::relu;
  bool pre_norm = false;  // false: post-LN blocks
  double dropout = 0.1;
  bool mlp_head = true;       // false: a single Linear head
  AttentionConfig attention;  // d_model, heads, sharing, pos2d, ... (causal is forced off)
};

// Per-position classifier: Linear-LayerNorm-ReLU-Dropout-Linear (mlp), or the last Linear alone.
class ClassifierHead : public Module {
 public:
  ClassifierHead(int64_t dim, int64_t classes, bool mlp, double dropout, Generator* gen);
  Tensor forward(const Tensor& x) const;
  std::unique_ptr<Linear> fc;
  std::unique_ptr<LayerNorm> norm;
  std::unique_ptr<Dropout> drop;
  Linear out;
};

class Encoder : public Module {
 public:
  explicit Encoder(const EncoderConfig& config, Generator* gen = nullptr);
  // ids [B, T] int64 -> logits [B, T, classes].
  Tensor forward(const Tensor& ids) const;
  // The input to block `layer` (for attention maps of that layer), ids [B, T].
  Tensor hidden_before(const Tensor& ids, int64_t layer) const;
  const EncoderConfig& config() const { return config_; }

  Linear input;  // one-hot [vocab] -> d_model
  std::vector<std::unique_ptr<TransformerBlock>> blocks;
  std::unique_ptr<LayerNorm> final_norm;  // pre-LN only
  ClassifierHead head;

 private:
  Tensor embed(const Tensor& ids) const;
  Tensor positions(int64_t T, const Device& device) const;
  EncoderConfig config_;
  mutable std::mutex pe_mu_;
  mutable std::map<int64_t, Tensor> pe_;
};

}  // namespace qkv::nn
