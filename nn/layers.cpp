#include "nn/layers.h"

#include <cmath>

#include "nn/init.h"

namespace qkv::nn {

Activation parse_activation(const std::string& name) {
  if (name == "relu") return Activation::relu;
  if (name == "gelu") return Activation::gelu;
  if (name == "gelu_tanh") return Activation::gelu_tanh;
  throw ValueError(cat("unknown activation '", name, "': expected relu, gelu or gelu_tanh"));
}

Tensor activate(const Tensor& x, Activation a) {
  switch (a) {
    case Activation::relu: return relu(x);
    case Activation::gelu: return gelu(x, false);
    case Activation::gelu_tanh: return gelu(x, true);
  }
  return x;
}

Linear::Linear(int64_t in, int64_t out, bool with_bias, Generator* gen) {
  check<ValueError>(in > 0 && out > 0, "Linear: sizes must be positive, got in=", in, " out=", out);
  const double bound = 1.0 / std::sqrt(double(in));
  weight = init_uniform({out, in}, bound, kCPU, gen);
  register_parameter("weight", &weight);
  if (with_bias) {
    bias = init_uniform({out}, bound, kCPU, gen);
    register_parameter("bias", &bias);
  }
}

Tensor Linear::forward(const Tensor& x) const {
  check<ShapeError>(x.dim() >= 1 && x.size(-1) == in_features(), "Linear: expected input [..., ", in_features(),
                    "], got ", shape_str(x.shape()));
  // One GEMM over all leading dims (on CUDA the bias rides in its epilogue). x goes in as it is,
  // not reshaped: linears reading one x then share its gradient's node, and each adds its input
  // gradient into the sum pending there (grad::linear).
  if (x.dim() >= 2) return linear(x, weight, bias);
  return linear(x.unsqueeze(0), weight, bias).squeeze(0);
}

Embedding::Embedding(int64_t num, int64_t dim, Generator* gen) {
  check<ValueError>(num > 0 && dim > 0, "Embedding: sizes must be positive, got num=", num, " dim=", dim);
  weight = init_normal({num, dim}, 1.0, kCPU, gen);
  register_parameter("weight", &weight);
}

Tensor Embedding::forward(const Tensor& ids) const { return embedding(weight, ids); }

LayerNorm::LayerNorm(int64_t dim, double eps_, bool affine, NormKind kind_) : eps(eps_), kind(kind_) {
  if (!affine) return;
  weight = ones({dim});
  register_parameter("weight", &weight);
  if (kind == NormKind::rms) return;
  bias = zeros({dim});
  register_parameter("bias", &bias);
}

Tensor LayerNorm::forward(const Tensor& x) const {
  return kind == NormKind::rms ? rms_norm(x, weight, eps) : layer_norm(x, weight, bias, eps);
}

Dropout::Dropout(double p_, Generator* gen) : p(p_), gen_(gen) {
  check<ValueError>(p >= 0 && p < 1, "Dropout: p must be in [0, 1), got ", p);
}

Tensor Dropout::forward(const Tensor& x) const { return dropout(x, p, is_training(), gen_); }

Tensor Dropout::after_relu(const Tensor& x) const { return relu_dropout(x, p, is_training(), gen_); }

AddNorm Dropout::add_norm(const Tensor& x, const Tensor& y, const LayerNorm& norm) const {
  if (norm.kind == NormKind::rms) return dropout_add_rms_norm(x, y, norm.weight, p, is_training(), gen_, norm.eps);
  return dropout_add_layer_norm(x, y, norm.weight, norm.bias, p, is_training(), gen_, norm.eps);
}

MLP::MLP(int64_t dim, int64_t hidden, Activation a, double p, Generator* gen)
    : fc1(dim, hidden, true, gen), fc2(hidden, dim, true, gen), drop(p, gen), act(a) {
  register_module("fc1", &fc1);
  register_module("fc2", &fc2);
  register_module("drop", &drop);
}

Tensor MLP::forward(const Tensor& x) const {
  const Tensor h = fc1.forward(x);
  return fc2.forward(act == Activation::relu ? drop.after_relu(h) : drop.forward(activate(h, act)));
}

}  // namespace qkv::nn
