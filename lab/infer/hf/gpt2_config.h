// A Hugging Face GPT-2's config.json (transformers' GPT2Config) read into the GPT's config, and
// written from it.
//
// Every key that changes what the model computes is read or checked: vocab_size, n_positions
// (n_ctx when it is absent), n_embd, n_layer, n_head, n_inner, activation_function (gelu_new and
// gelu_pytorch_tanh are GELU's tanh form, gelu the exact one, relu), layer_norm_epsilon (1e-5,
// the GPT's), scale_attn_weights (true), scale_attn_by_inverse_layer_idx (false),
// add_cross_attention (false), pruned_heads (none). resid_pdrop becomes the residual dropout.
// Keys known not to change the logits (ids, names, generation and summary-head settings,
// dropouts of the embedding and attention, initializer_range, torch_dtype and transformers 5's
// dtype, ...) are ignored. Any other key is a warning naming it (the import assumes it changes
// nothing), or under `strict` an error: the import cannot tell what it would change.
#pragma once
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "nn/models/gpt.h"

namespace qkv::infer {

struct HfGpt2Config {
  nn::GPTConfig gpt;                    // QKV, as many KV heads as heads
  bool tied_head = true;                // tie_word_embeddings
  std::optional<int64_t> eos_token_id;  // when the file gives one
  std::vector<std::string> warnings;    // one per unknown key, naming the file and the key
};

// IOError naming the file and key for a missing, malformed or unsupported key, and with `strict`
// for an unknown one.
HfGpt2Config read_hf_gpt2_config(const std::filesystem::path& file, bool strict = false);

// The config.json of a GPT-2 computing what `c` computes (its attention written out as QKV with
// all heads), for transformers' GPT2LMHeadModel. ValueError for a GPT that GPT-2 cannot express.
nlohmann::json hf_gpt2_config_json(const nn::GPTConfig& c, std::optional<int64_t> eos_token_id);

// ValueError for a model GPT-2 cannot express: 2D positional scores, linear attention, and the
// Llama block's parts (rotary positions, RMS norms, a SwiGLU MLP, an untied output layer, a head
// dim other than d_model / heads, a model without biases).
void check_gpt2_expressible(const nn::GPTConfig& c);

// transformers' name of the activation ("gelu_new" for gelu_tanh).
const char* hf_activation_name(nn::Activation a);

}  // namespace qkv::infer
