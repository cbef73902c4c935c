#include "lab/infer/hf/llama_config.h"

#include <set>

#include "io/json_read.h"
#include "lab/infer/hf/config_keys.h"
#include "tensor/error.h"

namespace qkv::infer {

namespace {

using nlohmann::json;

const std::set<std::string, std::less<>> kLlamaReadKeys{"vocab_size",
                                                        "hidden_size",
                                                        "intermediate_size",
                                                        "num_hidden_layers",
                                                        "num_attention_heads",
                                                        "num_key_value_heads",
                                                        "head_dim",
                                                        "max_position_embeddings",
                                                        "rms_norm_eps",
                                                        "hidden_act",
                                                        "tie_word_embeddings",
                                                        "attention_bias",
                                                        "mlp_bias",
                                                        "rope_parameters",
                                                        "rope_theta",
                                                        "rope_scaling"};
// Training-only dropout, init, and pretraining_tp (it only slices the same products).
const std::set<std::string, std::less<>> kLlamaIgnoredKeys{"attention_dropout", "pretraining_tp"};
// The keys of a rope_parameters / rope_scaling object this import reads.
const std::set<std::string, std::less<>> kRopeKeys{"rope_type",
                                                   "type",
                                                   "rope_theta",
                                                   "factor",
                                                   "low_freq_factor",
                                                   "high_freq_factor",
                                                   "original_max_position_embeddings",
                                                   "partial_rotary_factor"};

// The rotary settings from whichever layout the file has.
nn::RopeConfig rope_of(const HfConfigReader& r, std::vector<std::string>& warnings, bool strict) {
  const json& j = r.j;
  const bool new_layout = j.contains("rope_parameters") && !j["rope_parameters"].is_null();
  const std::string key = new_layout ? "rope_parameters" : "rope_scaling";
  nn::RopeConfig rope;
  rope.theta = r.number("rope_theta", 10000.0);
  if (!j.contains(key) || j[key].is_null()) return rope;
  const json& p = j[key];
  if (!p.is_object()) r.fail(key, cat("expected an object, got ", p.dump()));
  const HfConfigReader sub{p, cat(r.file, ": key '", key, "'")};
  const std::string type_key = p.contains("rope_type") ? "rope_type" : "type";
  if (p.contains(type_key) && !p[type_key].is_string())
    r.fail(cat(key, ".", type_key), cat("expected a string, got ", p[type_key].dump()));
  const std::string type = p.contains(type_key) ? p[type_key].get<std::string>() : "default";
  if (p.contains("rope_theta")) rope.theta = sub.number("rope_theta", rope.theta);
  if (!(rope.theta > 0)) r.fail(key, cat("rope_theta ", rope.theta, " is not positive"));
  for (const auto& [k, v] : p.items()) {
    if (kRopeKeys.contains(k)) continue;
    if (strict) r.fail(cat(key, ".", k), "unknown to qkvlab's Llama import (--strict)");
    warnings.push_back(cat(r.file, ": key '", key, ".", k, "' (", v.dump(),
                           ") is unknown to qkvlab's Llama import; assumed not to change the logits (--strict makes "
                           "it an error)"));
  }
  // LlamaForCausalLM turns whole heads: a partial rotation has no Llama form to match.
  if (p.contains("partial_rotary_factor") && sub.number("partial_rotary_factor", 1.0) != 1.0)
    r.fail(cat(key, ".partial_rotary_factor"),
           cat(p["partial_rotary_factor"].dump(), " is not supported: a Llama turns whole heads (1.0)"));
  if (type == "default") return rope;
  if (type != "linear" && type != "llama3")
    r.fail(cat(key, ".", type_key), cat(json(type).dump(), " is not supported: expected default, linear or llama3"));
  rope.factor = sub.number("factor", 0);
  if (!(rope.factor >= 1))
    r.fail(cat(key, ".factor"),
           cat("expected a number >= 1, got ", p.contains("factor") ? p["factor"].dump() : "nothing"));
  if (type == "linear") {
    rope.scaling = nn::RopeScaling::linear;
    return rope;
  }
  rope.scaling = nn::RopeScaling::llama3;
  rope.low_freq_factor = sub.number("low_freq_factor", 1.0);
  rope.high_freq_factor = sub.number("high_freq_factor", 4.0);
  const json fallback = j.contains("max_position_embeddings") ? j["max_position_embeddings"] : json(8192);
  rope.original_context = sub.positive("original_max_position_embeddings", &fallback);
  if (!(rope.low_freq_factor > 0 && rope.high_freq_factor > rope.low_freq_factor))
    r.fail(key, cat("llama3 needs 0 < low_freq_factor < high_freq_factor, got ", rope.low_freq_factor, " and ",
                    rope.high_freq_factor));
  return rope;
}

}  // namespace

void check_llama_expressible(const nn::GPTConfig& c) {
  const nn::AttentionConfig& a = c.attention;
  check<ValueError>(a.rope && c.norm == nn::NormKind::rms && c.mlp == nn::MlpKind::swiglu, "export --format hf-llama: ",
                    "the run is not a Llama-style model (model.kind llama: rotary positions, RMS norms, a SwiGLU MLP)");
  check<ValueError>(a.pos2d == 0 && !a.linear, "export --format hf-llama: a Llama has softmax attention without 2D ",
                    "positional scores");
  check<ValueError>(a.rope->rotary_dims(a.head_dim()) == a.head_dim(), "export --format hf-llama: a Llama turns ",
                    "whole heads; this model turns ", a.rope->rotary_dims(a.head_dim()), " of ", a.head_dim(), " dims");
}

HfLlamaConfig read_hf_llama_config(const std::filesystem::path& file, bool strict) {
  const json j = read_json_file(file, "a Hugging Face config.json", uint64_t(16) << 20);
  const HfConfigReader r{j, file.string()};
  if (!j.is_object()) throw IOError(cat(r.file, ": expected a JSON object, got ", j.type_name()));
  HfLlamaConfig c;
  c.warnings = unknown_key_warnings(r, kLlamaReadKeys, kLlamaIgnoredKeys, "Llama", strict);
  if (j.contains("model_type") && j["model_type"] != "llama")
    r.fail("model_type", cat(j["model_type"].dump(), " is not \"llama\""));
  if (j.contains("hidden_act") && j["hidden_act"] != "silu")
    r.fail("hidden_act", cat(j["hidden_act"].dump(), " is not supported: a Llama MLP is SwiGLU (\"silu\")"));

  nn::GPTConfig g;
  g.vocab = r.positive("vocab_size");
  g.context = r.positive("max_position_embeddings");
  g.layers = r.positive("num_hidden_layers");
  g.ffn = r.positive("intermediate_size");
  g.dropout = 0.0;
  nn::AttentionConfig& a = g.attention;
  a.d_model = r.positive("hidden_size");
  a.heads = r.positive("num_attention_heads");
  const json heads = json(a.heads);
  a.kv_heads = r.positive("num_key_value_heads", &heads);
  if (a.heads % a.kv_heads != 0)
    r.fail("num_key_value_heads", cat(a.kv_heads, " does not divide num_attention_heads ", a.heads));
  if (a.kv_heads == a.heads) a.kv_heads = 0;
  if (j.contains("head_dim") && !j["head_dim"].is_null()) a.head_size = r.positive("head_dim");
  else if (a.d_model % a.heads != 0)
    r.fail("num_attention_heads", cat(a.heads, " does not divide hidden_size ", a.d_model));
  a.sharing = nn::Sharing::qkv;
  a.causal = true;
  g = nn::llama_block(g, rope_of(r, c.warnings, strict));
  g.norm_eps = r.number("rms_norm_eps", 1e-6);
  if (!(g.norm_eps >= 0)) r.fail("rms_norm_eps", cat(g.norm_eps, " is negative"));
  a.bias = r.flag("attention_bias", false);
  g.mlp_bias = r.flag("mlp_bias", false);
  g.tied_head = r.flag("tie_word_embeddings", false);
  for (auto [key, out] : {std::pair{"bos_token_id", &c.bos_token_id}, std::pair{"eos_token_id", &c.eos_token_id}})
    if (j.contains(key) && j[key].is_number_integer()) *out = j[key].get<int64_t>();
  c.gpt = g;
  return c;
}

json hf_llama_config_json(const nn::GPTConfig& c, std::optional<int64_t> bos_token_id,
                          std::optional<int64_t> eos_token_id) {
  check_llama_expressible(c);
  const nn::AttentionConfig& a = c.attention;
  const nn::RopeConfig& rope = *a.rope;
  json parameters{{"rope_type", "default"}, {"rope_theta", rope.theta}};
  if (rope.scaling != nn::RopeScaling::none) {
    parameters["rope_type"] = nn::rope_scaling_name(rope.scaling);
    parameters["factor"] = rope.factor;
  }
  if (rope.scaling == nn::RopeScaling::llama3) {
    parameters["low_freq_factor"] = rope.low_freq_factor;
    parameters["high_freq_factor"] = rope.high_freq_factor;
    parameters["original_max_position_embeddings"] = rope.original_context;
  }
  // K and V as projections of their own: the KV heads a variant shares with Q are all the heads.
  const bool k_tied_to_q = a.pattern().ties(nn::Role::q, nn::Role::k) || a.pattern().ties(nn::Role::q, nn::Role::v);
  json j{{"architectures", {"LlamaForCausalLM"}},
         {"model_type", "llama"},
         {"vocab_size", c.vocab},
         {"hidden_size", a.d_model},
         {"intermediate_size", c.ffn_width()},
         {"num_hidden_layers", c.layers},
         {"num_attention_heads", a.heads},
         {"num_key_value_heads", k_tied_to_q ? a.heads : a.kv_head_count()},
         {"head_dim", a.head_dim()},
         {"max_position_embeddings", c.context},
         {"rms_norm_eps", c.norm_eps},
         {"hidden_act", "silu"},
         {"attention_bias", a.bias},
         {"mlp_bias", c.mlp_bias},
         {"tie_word_embeddings", c.tied_head},
         {"rope_parameters", parameters},
         {"attention_dropout", 0.0},
         {"initializer_range", c.init_std},
         {"use_cache", true},
         {"dtype", "float32"}};
  // transformers before 5.0 reads rope_theta and rope_scaling: written too, so either loads it.
  j["rope_theta"] = rope.theta;
  if (rope.scaling != nn::RopeScaling::none) {
    json legacy = parameters;
    legacy.erase("rope_theta");
    j["rope_scaling"] = legacy;
  }
  if (bos_token_id) j["bos_token_id"] = *bos_token_id;
  if (eos_token_id) j["eos_token_id"] = *eos_token_id;
  return j;
}

}  // namespace qkv::infer
