// A Hugging Face checkpoint folder's tensors, and what the GPT-2 and Llama conversions share:
// reading model.safetensors or a sharded index, fetching a tensor with its shape checked against
// config.json, and writing a layer's Q, K and V as the full projections a Hugging Face model
// holds whatever the variant shares.
#pragma once
#include <array>
#include <filesystem>
#include <map>
#include <set>
#include <string>

#include "nn/attention.h"

namespace qkv::infer {

struct HfTensor {
  Tensor value;      // on the host, in the file's dtype
  std::string file;  // the file it came from, for errors
};
using HfTensors = std::map<std::string, HfTensor>;  // by the name in the file

// The tensors of `folder`: model.safetensors, or the shards model.safetensors.index.json lists.
// IOError naming the file: neither present (a pytorch_model.bin is named as unsupported), an index
// that is not {"weight_map": {name: shard}}, a shard outside the folder or missing, a tensor the
// index places in a shard that does not hold it, or a shard tensor the index does not list.
HfTensors read_hf_tensors(const std::filesystem::path& folder);

// The folder's files, for an error about a tensor that is missing.
std::string files_of(const HfTensors& tensors);

// Reads tensors by name under a prefix, recording which were read so that the rest can be
// refused as not part of the model.
struct HfSource {
  const HfTensors& tensors;
  std::string prefix;  // "transformer." (GPT2LMHeadModel), "model." (LlamaForCausalLM) or ""
  std::string where;   // the folder's files, for a missing tensor
  std::set<std::string> used = {};

  const HfTensor& at(const std::string& name) const;
  // The tensor as float32, checked to have `shape`.
  Tensor get(const std::string& name, const Shape& shape);
  // IOError naming the first tensor of the folder not read, with `model` in the message.
  void check_all_used(const std::string& model) const;
};

Tensor transposed(const Tensor& t);
bool same_values(const Tensor& a, const Tensor& b);  // float32, bit for bit

// Q, K and V of one layer as the projections a model without sharing holds: weight [out, in]
// and bias [out] (zeros where the variant has none). A shared projection is copied for each
// role it serves, a low-rank V residual is folded into V's weights; KV heads stay as they are
// (query width for a role tied to Q), or with `repeat_kv_heads` are repeated for their query
// heads (GPT-2, which has no KV heads of its own).
struct RoleWeights {
  Tensor weight, bias;
};
std::array<RoleWeights, 3> role_weights(const std::map<std::string, Tensor>& state, const std::string& at,
                                        const nn::AttentionConfig& a, bool repeat_kv_heads);

}  // namespace qkv::infer
