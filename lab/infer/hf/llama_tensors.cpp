#include "lab/infer/hf/llama_tensors.h"

#include "autograd/grad_mode.h"
#include "autograd/ops.h"

namespace qkv::infer {

std::map<std::string, Tensor> llama_state_from_hf(const HfTensors& tensors, const HfLlamaConfig& c) {
  NoGradGuard no_grad;
  const nn::GPTConfig& g = c.gpt;
  const nn::AttentionConfig& a = g.attention;
  const int64_t d = g.d_model(), f = g.ffn_width(), q = a.query_width(), kv = a.kv_head_count() * a.head_dim();
  HfSource src{tensors, "model.", files_of(tensors)};
  std::map<std::string, Tensor> s;
  const auto linear = [&](const std::string& from, const std::string& to, int64_t out, int64_t in, bool bias) {
    s[to + ".weight"] = src.get(from + ".weight", {out, in});
    if (bias) s[to + ".bias"] = src.get(from + ".bias", {out});
  };
  s["wte.weight"] = src.get("embed_tokens.weight", {g.vocab, d});
  s["ln_f.weight"] = src.get("norm.weight", {d});
  for (int64_t i = 0; i < g.layers; ++i) {
    const std::string h = cat("layers.", i, "."), b = cat("blocks.", i, ".");
    s[b + "ln1.weight"] = src.get(h + "input_layernorm.weight", {d});
    s[b + "ln2.weight"] = src.get(h + "post_attention_layernorm.weight", {d});
    linear(h + "self_attn.q_proj", b + "attn.q", q, d, a.bias);
    linear(h + "self_attn.k_proj", b + "attn.k", kv, d, a.bias);
    linear(h + "self_attn.v_proj", b + "attn.v", kv, d, a.bias);
    linear(h + "self_attn.o_proj", b + "attn.o", d, q, a.bias);
    linear(h + "mlp.down_proj", b + "proj", d, f, g.mlp_bias);
    // The gate's rows, then the up projection's: one GEMM for both (nn::MlpKind::swiglu).
    s[b + "fc.weight"] =
        concat({src.get(h + "mlp.gate_proj.weight", {f, d}), src.get(h + "mlp.up_proj.weight", {f, d})}, 0);
    if (g.mlp_bias)
      s[b + "fc.bias"] = concat({src.get(h + "mlp.gate_proj.bias", {f}), src.get(h + "mlp.up_proj.bias", {f})}, 0);
    src.used.insert("model." + h + "self_attn.rotary_emb.inv_freq");  // a buffer older files saved
  }
  // The output layer sits beside the model's prefix.
  HfSource top{tensors, "", src.where};
  if (g.tied_head) {
    if (tensors.contains("lm_head.weight")) {
      const HfTensor& head = tensors.at("lm_head.weight");
      check<IOError>(same_values(head.value.to(DType::f32).contiguous(), s["wte.weight"]), head.file,
                     ": tensor 'lm_head.weight' differs from 'model.embed_tokens.weight' while config.json ties them ",
                     "(tie_word_embeddings)");
      src.used.insert("lm_head.weight");
    }
  } else {
    s["lm_head.weight"] = top.get("lm_head.weight", {g.vocab, d});
    src.used.insert("lm_head.weight");
  }
  src.check_all_used(cat("a Llama with ", g.layers, " layers (config.json: num_hidden_layers)"));
  return s;
}

std::vector<std::pair<std::string, Tensor>> hf_llama_tensors_of(const nn::GPT& model) {
  NoGradGuard no_grad;
  const nn::GPTConfig& g = model.config();
  const nn::AttentionConfig& a = g.attention;
  check_llama_expressible(g);
  std::map<std::string, Tensor> s;
  for (auto& [name, t] : model.state_dict()) s[name] = t.to(kCPU).to(DType::f32).contiguous();
  std::vector<std::pair<std::string, Tensor>> out;
  const auto put = [&](const std::string& name, const Tensor& t) { out.emplace_back(name, t); };
  const int64_t f = g.ffn_width();
  put("model.embed_tokens.weight", s.at("wte.weight"));
  put("model.norm.weight", s.at("ln_f.weight"));
  if (!g.tied_head) put("lm_head.weight", s.at("lm_head.weight"));
  for (int64_t i = 0; i < g.layers; ++i) {
    const std::string h = cat("model.layers.", i, "."), b = cat("blocks.", i, ".");
    put(h + "input_layernorm.weight", s.at(b + "ln1.weight"));
    put(h + "post_attention_layernorm.weight", s.at(b + "ln2.weight"));
    const auto roles = role_weights(s, b + "attn.", a, /*repeat_kv_heads=*/false);
    const char* names[] = {"q_proj", "k_proj", "v_proj"};
    for (int r = 0; r < 3; ++r) {
      put(h + "self_attn." + names[r] + ".weight", roles[size_t(r)].weight);
      if (a.bias) put(h + "self_attn." + names[r] + ".bias", roles[size_t(r)].bias);
    }
    put(h + "self_attn.o_proj.weight", s.at(b + "attn.o.weight"));
    if (a.bias) put(h + "self_attn.o_proj.bias", s.at(b + "attn.o.bias"));
    const Tensor& fc = s.at(b + "fc.weight");
    put(h + "mlp.gate_proj.weight", fc.narrow(0, 0, f).contiguous());
    put(h + "mlp.up_proj.weight", fc.narrow(0, f, f).contiguous());
    put(h + "mlp.down_proj.weight", s.at(b + "proj.weight"));
    if (g.mlp_bias) {
      const Tensor& fb = s.at(b + "fc.bias");
      put(h + "mlp.gate_proj.bias", fb.narrow(0, 0, f).contiguous());
      put(h + "mlp.up_proj.bias", fb.narrow(0, f, f).contiguous());
      put(h + "mlp.down_proj.bias", s.at(b + "proj.bias"));
    }
  }
  return out;
}

}  // namespace qkv::infer
