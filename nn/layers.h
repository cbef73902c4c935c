// The standard layers. Each mirrors its PyTorch namesake's parameters, names and default
// initialization, so state dicts and behaviour line up with torch.nn.
#pragma once
#include "nn/module.h"

namespace qkv::nn {

enum class Activation { relu, gelu, gelu_tanh };
Activation parse_activation(const std::string& name);  // "relu", "gelu", "gelu_tanh"
Tensor activate(const Tensor& x, Activation a);

// y = x W^T + b, W [out, in]. Init as torch.nn.Linear: U(-1/sqrt(in), 1/sqrt(in)) for both.
class Linear : public Module {
 public:
  Linear(int64_t in, int64_t out, bool bias = true, Generator* gen = nullptr);
  Tensor forward(const Tensor& x) const;  // x [..., in] -> [..., out]
  int64_t in_features() const { return weight.size(1); }
  int64_t out_features() const { return weight.size(0); }
  Tensor weight, bias;  // bias undefined without one
};

// Rows of a [num, dim] table by index. Init N(0, 1) as torch.nn.Embedding.
class Embedding : public Module {
 public:
  Embedding(int64_t num, int64_t dim, Generator* gen = nullptr);
  Tensor forward(const Tensor& ids) const;
  Tensor weight;
};

// How a norm layer normalizes: centered and scaled (LayerNorm), or scaled by the root mean square
// alone (RMSNorm, as Llama-style models; weight only, no bias).
enum class NormKind : uint8_t { layer, rms };

// Normalizes the last dim; weight 1 and bias 0 when affine. One module for both kinds, so a
// block holds either and its fused residual step (Dropout::add_norm) takes either.
class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t dim, double eps = 1e-5, bool affine = true, NormKind kind = NormKind::layer);
  Tensor forward(const Tensor& x) const;
  Tensor weight, bias;  // bias undefined for the RMS norm
  double eps;
  NormKind kind;
};

// Zeroes elements with probability p while training (scaling the rest by 1/(1-p)).
class Dropout : public Module {
 public:
  explicit Dropout(double p, Generator* gen = nullptr);
  Tensor forward(const Tensor& x) const;
  // forward(relu(x)) as one op (relu_dropout), drawing the same numbers; its backward reads
  // the output alone.
  Tensor after_relu(const Tensor& x) const;
  // The pre-LN residual step: x + forward(y) and `norm` of it, as one op
  // (dropout_add_layer_norm or dropout_add_rms_norm), drawing the random numbers forward(y) would.
  AddNorm add_norm(const Tensor& x, const Tensor& y, const LayerNorm& norm) const;
  double p;

 private:
  Generator* gen_;
};

// Linear -> activation -> dropout -> Linear: the transformer's feed-forward block.
class MLP : public Module {
 public:
  MLP(int64_t dim, int64_t hidden, Activation act, double dropout, Generator* gen = nullptr);
  Tensor forward(const Tensor& x) const;
  Linear fc1, fc2;
  Dropout drop;
  Activation act;
};

}  // namespace qkv::nn
