// qkvlab's model layer (nn/): Module with hierarchical named parameters, the building blocks
// (Linear, Embedding, LayerNorm, Dropout, MLP, position encodings), Attention with every
// projection-sharing and head-sharing variant, and the models built from them.
//
// A Module registers its parameters (pointers to its own Tensor members) and its child modules
// under names; named_parameters() walks them depth-first as "blocks.0.attn.q.weight". A tied
// parameter is registered once, where it lives, and used by reference elsewhere, so it is the
// same tensor everywhere and appears once in the state dict. Linear weights use PyTorch's
// [out, in] layout, so a state dict loads into the matching PyTorch model.
#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "autograd/autograd.h"

namespace qkv::nn {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

class Module {
 public:
  Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  virtual ~Module() = default;

  NamedTensors named_parameters() const;
  // Buffers: state that is saved and loaded but not trained (batch-norm running statistics).
  NamedTensors named_buffers() const;
  std::vector<Tensor> parameters() const;
  int64_t num_parameters() const;

  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  void zero_grad();
  // Moves every parameter to `device` (its values and requires_grad kept).
  void to(const Device& device);
  // Casts every floating parameter and buffer to the floating `dtype` (rounded; requires_grad
  // kept): bf16 weights for inference, say.
  void to(DType dtype);

  // Parameters and buffers by name (detached handles on the same storage).
  NamedTensors state_dict() const;
  // Copies values in. strict: every parameter must be present with its exact shape and no
  // extra names may appear; errors name the offending parameter. Dtypes are converted.
  void load_state_dict(const std::map<std::string, Tensor>& state, bool strict = true);
  void save(const std::string& path, const std::map<std::string, std::string>& metadata = {}) const;
  void load(const std::string& path, bool strict = true);

 protected:
  // `slot` is a Tensor member of the subclass; it becomes a leaf that requires grad.
  void register_parameter(const std::string& name, Tensor* slot);
  void register_module(const std::string& name, Module* child);
  // `slot` is a Tensor member that is state but not a parameter (no gradient).
  void register_buffer(const std::string& name, Tensor* slot);

 private:
  void collect(const std::string& prefix, std::vector<std::pair<std::string, Tensor*>>& out, bool buffers) const;
  std::vector<std::pair<std::string, Tensor*>> params_, buffers_;
  std::vector<std::pair<std::string, Module*>> children_;
  bool training_ = true;
};

}  // namespace qkv::nn
