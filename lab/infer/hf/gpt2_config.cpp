#include "lab/infer/hf/gpt2_config.h"

#include <cmath>
#include <set>
#include <string>

#include "io/json_read.h"
#include "lab/infer/hf/config_keys.h"
#include "tensor/error.h"

namespace qkv::infer {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Keys that do not change the logits of GPT2LMHeadModel beside every model's: the
// sequence-summary head (GPT2DoubleHeadsModel), training-only dropouts, the old n_ctx.
const std::set<std::string, std::less<>> kGpt2IgnoredKeys{"embd_pdrop",
                                                          "attn_pdrop",
                                                          "summary_type",
                                                          "summary_use_proj",
                                                          "summary_activation",
                                                          "summary_proj_to_labels",
                                                          "summary_first_dropout",
                                                          "reorder_and_upcast_attn",
                                                          "n_ctx"};
const std::set<std::string, std::less<>> kGpt2ReadKeys{"vocab_size",
                                                       "n_positions",
                                                       "n_embd",
                                                       "n_layer",
                                                       "n_head",
                                                       "n_inner",
                                                       "activation_function",
                                                       "layer_norm_epsilon",
                                                       "resid_pdrop",
                                                       "scale_attn_weights",
                                                       "scale_attn_by_inverse_layer_idx",
                                                       "add_cross_attention",
                                                       "pruned_heads",
                                                       "tie_word_embeddings"};

using Reader = HfConfigReader;

nn::Activation activation_of(const Reader& r) {
  const std::string key = "activation_function";
  if (!r.j.contains(key)) return nn::Activation::gelu_tanh;  // GPT2Config's default, gelu_new
  if (!r.j[key].is_string()) r.fail(key, cat("expected a string, got ", r.j[key].dump()));
  const std::string a = r.j[key].get<std::string>();
  if (a == "gelu_new" || a == "gelu_pytorch_tanh") return nn::Activation::gelu_tanh;
  if (a == "gelu") return nn::Activation::gelu;
  if (a == "relu") return nn::Activation::relu;
  r.fail(key, cat(json(a).dump(), " is not supported: expected gelu_new, gelu_pytorch_tanh, gelu or relu"));
}

}  // namespace

void check_gpt2_expressible(const nn::GPTConfig& c) {
  const nn::AttentionConfig& a = c.attention;
  check<ValueError>(a.pos2d == 0 && !a.linear, "export: GPT-2 has softmax attention without 2D positional scores");
  check<ValueError>(!a.rope && c.norm == nn::NormKind::layer && c.mlp == nn::MlpKind::plain && c.tied_head &&
                        a.head_dim() * a.heads == a.d_model && c.mlp_bias,
                    "export: a Llama-style model (rotary positions, RMS norms, a SwiGLU MLP, an output layer of its ",
                    "own or a head dim of its own) has no GPT-2 form; export it with --format hf-llama");
}

const char* hf_activation_name(nn::Activation a) {
  switch (a) {
    case nn::Activation::gelu_tanh: return "gelu_new";
    case nn::Activation::gelu: return "gelu";
    case nn::Activation::relu: return "relu";
  }
  return "gelu_new";
}

HfGpt2Config read_hf_gpt2_config(const fs::path& file, bool strict) {
  const json j = read_json_file(file, "a Hugging Face config.json", uint64_t(16) << 20);
  const Reader r{j, file.string()};
  if (!j.is_object()) throw IOError(cat(r.file, ": expected a JSON object, got ", j.type_name()));
  HfGpt2Config c;
  c.warnings = unknown_key_warnings(r, kGpt2ReadKeys, kGpt2IgnoredKeys, "GPT-2", strict);
  if (j.contains("model_type") && j["model_type"] != "gpt2")
    r.fail("model_type", cat(j["model_type"].dump(), " is not \"gpt2\""));
  for (const char* key : {"is_encoder_decoder", "add_cross_attention"})
    r.require(key, false, false, "GPT-2 without cross-attention only");

  nn::GPTConfig& g = c.gpt;
  g.vocab = r.positive("vocab_size");
  g.context = r.positive("n_positions", j.contains("n_ctx") ? &j["n_ctx"] : nullptr);
  g.layers = r.positive("n_layer");
  g.attention.d_model = r.positive("n_embd");
  g.attention.heads = r.positive("n_head");
  g.attention.kv_heads = 0;
  g.attention.sharing = nn::Sharing::qkv;
  g.attention.causal = true;
  g.ffn = j.contains("n_inner") && !j["n_inner"].is_null() ? r.positive("n_inner") : 0;
  g.activation = activation_of(r);
  g.dropout = r.number("resid_pdrop", 0.1);
  if (!(g.dropout >= 0 && g.dropout < 1)) r.fail("resid_pdrop", cat(g.dropout, " is not in [0, 1)"));
  const double eps = r.number("layer_norm_epsilon", 1e-5);
  if (std::abs(eps - 1e-5) > 1e-12) r.fail("layer_norm_epsilon", cat(eps, " is not supported: the GPT's is 1e-05"));
  r.require("scale_attn_weights", true, true, "scores are scaled by 1/sqrt(head dim)");
  r.require("scale_attn_by_inverse_layer_idx", false, false, "scores are not scaled by the layer index");
  if (j.contains("pruned_heads") && !(j["pruned_heads"].is_object() && j["pruned_heads"].empty()))
    r.fail("pruned_heads", "pruned heads are not supported (every layer has n_head heads)");
  c.tied_head = r.flag("tie_word_embeddings", true);
  if (j.contains("eos_token_id") && j["eos_token_id"].is_number_integer())
    c.eos_token_id = j["eos_token_id"].get<int64_t>();
  if (g.attention.d_model % g.attention.heads != 0)
    r.fail("n_head", cat(g.attention.heads, " does not divide n_embd ", g.attention.d_model));
  return c;
}

json hf_gpt2_config_json(const nn::GPTConfig& c, std::optional<int64_t> eos_token_id) {
  const nn::AttentionConfig& a = c.attention;
  check_gpt2_expressible(c);
  json j{{"architectures", {"GPT2LMHeadModel"}},
         {"model_type", "gpt2"},
         {"vocab_size", c.vocab},
         {"n_positions", c.context},
         {"n_ctx", c.context},
         {"n_embd", a.d_model},
         {"n_layer", c.layers},
         {"n_head", a.heads},
         {"n_inner", c.ffn_width() == 4 * a.d_model ? json() : json(c.ffn_width())},
         {"activation_function", hf_activation_name(c.activation)},
         {"resid_pdrop", c.dropout},
         {"embd_pdrop", c.dropout},
         {"attn_pdrop", 0.0},
         {"layer_norm_epsilon", 1e-5},
         {"initializer_range", c.init_std},
         {"scale_attn_weights", true},
         {"scale_attn_by_inverse_layer_idx", false},
         {"reorder_and_upcast_attn", false},
         {"tie_word_embeddings", true},
         {"use_cache", true},
         {"torch_dtype", "float32"}};
  if (eos_token_id) {
    j["bos_token_id"] = *eos_token_id;
    j["eos_token_id"] = *eos_token_id;
  }
  return j;
}

}  // namespace qkv::infer
