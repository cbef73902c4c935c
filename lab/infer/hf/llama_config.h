// A Hugging Face Llama's config.json (transformers' LlamaConfig) read into the GPT's Llama form
// (nn::llama_block), and written from it.
//
// Read or checked: vocab_size, hidden_size, intermediate_size, num_hidden_layers,
// num_attention_heads, num_key_value_heads (GQA; the heads when absent), head_dim (hidden_size /
// heads when absent or null), max_position_embeddings, rms_norm_eps, hidden_act ("silu"),
// tie_word_embeddings (false when absent, as LlamaConfig), attention_bias, mlp_bias, and the
// rotary settings in either layout: transformers 5's rope_parameters {rope_type, rope_theta,
// factor, ...}, or the earlier rope_theta beside rope_scaling {rope_type (or type), factor, ...}.
// rope_type default, linear and llama3 are read; dynamic, yarn and longrope are refused.
// Keys that cannot change the logits (attention_dropout, pretraining_tp, initializer_range,
// config_keys.h's) are ignored; an unknown key is a warning naming it (strict: an error).
#pragma once
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "nn/models/gpt.h"

namespace qkv::infer {

struct HfLlamaConfig {
  nn::GPTConfig gpt;  // QKV with num_key_value_heads, the Llama block
  std::optional<int64_t> bos_token_id, eos_token_id;
  std::vector<std::string> warnings;
};

// IOError naming the file and key for a missing, malformed or unsupported key (strict: also an
// unknown one).
HfLlamaConfig read_hf_llama_config(const std::filesystem::path& file, bool strict = false);

// The config.json of a LlamaForCausalLM computing what `c` computes (its attention written out
// with K and V projections of their own). ValueError for a model a Llama cannot express.
nlohmann::json hf_llama_config_json(const nn::GPTConfig& c, std::optional<int64_t> bos_token_id,
                                    std::optional<int64_t> eos_token_id);

// ValueError for a model that is not the Llama block or has what a Llama cannot express:
// learned positions, layer norms, a plain MLP, dropout aside, 2D positional scores, linear
// attention, a partial rotary fraction.
void check_llama_expressible(const nn::GPTConfig& c);

}  // namespace qkv::infer
