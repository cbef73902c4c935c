#include "lab/infer/hf/gpt2_tensors.h"

#include "autograd/grad_mode.h"
#include "autograd/ops.h"

namespace qkv::infer {

namespace fs = std::filesystem;

std::map<std::string, Tensor> gpt_state_from_hf(const HfTensors& tensors, const HfGpt2Config& c) {
  NoGradGuard no_grad;
  const nn::GPTConfig& g = c.gpt;
  const int64_t d = g.d_model(), f = g.ffn_width();
  HfSource src{tensors, tensors.contains("transformer.wte.weight") ? "transformer." : "", files_of(tensors)};
  const auto get = [&](const std::string& name, const Shape& shape) { return src.get(name, shape); };
  std::map<std::string, Tensor> s;
  s["wte.weight"] = get("wte.weight", {g.vocab, d});
  s["wpe.weight"] = get("wpe.weight", {g.context, d});
  s["ln_f.weight"] = get("ln_f.weight", {d});
  s["ln_f.bias"] = get("ln_f.bias", {d});
  for (int64_t i = 0; i < g.layers; ++i) {
    const std::string h = cat("h.", i, "."), b = cat("blocks.", i, ".");
    for (const auto& [from, to] : {std::pair{"ln_1", "ln1"}, std::pair{"ln_2", "ln2"}}) {
      s[b + to + ".weight"] = get(h + from + ".weight", {d});
      s[b + to + ".bias"] = get(h + from + ".bias", {d});
    }
    const Tensor qkv_w = transposed(get(h + "attn.c_attn.weight", {d, 3 * d}));
    const Tensor qkv_b = get(h + "attn.c_attn.bias", {3 * d});
    const char* roles[] = {"q", "k", "v"};
    for (int r = 0; r < 3; ++r) {
      s[b + "attn." + roles[r] + ".weight"] = qkv_w.narrow(0, r * d, d).contiguous();
      s[b + "attn." + roles[r] + ".bias"] = qkv_b.narrow(0, r * d, d).contiguous();
    }
    s[b + "attn.o.weight"] = transposed(get(h + "attn.c_proj.weight", {d, d}));
    s[b + "attn.o.bias"] = get(h + "attn.c_proj.bias", {d});
    s[b + "fc.weight"] = transposed(get(h + "mlp.c_fc.weight", {d, f}));
    s[b + "fc.bias"] = get(h + "mlp.c_fc.bias", {f});
    s[b + "proj.weight"] = transposed(get(h + "mlp.c_proj.weight", {f, d}));
    s[b + "proj.bias"] = get(h + "mlp.c_proj.bias", {d});
    src.used.insert(src.prefix + h + "attn.bias");         // the causal mask buffer of older files
    src.used.insert(src.prefix + h + "attn.masked_bias");  // and its fill value
  }
  if (tensors.contains("lm_head.weight")) {
    src.used.insert("lm_head.weight");
    const HfTensor& head = tensors.at("lm_head.weight");
    check<IOError>(same_values(head.value.to(DType::f32).contiguous(), s["wte.weight"]), head.file,
                   ": tensor 'lm_head.weight' differs from '", src.prefix,
                   "wte.weight': an output layer apart from the token embedding is not supported (GPT-2 ties them)");
  } else {
    check<IOError>(c.tied_head, src.where, ": tensor 'lm_head.weight' is missing and config.json sets ",
                   "tie_word_embeddings to false");
  }
  src.check_all_used(cat("a GPT-2 with ", g.layers, " layers (config.json: n_layer)"));
  return s;
}

std::vector<std::pair<std::string, Tensor>> hf_tensors_of(const nn::GPT& model) {
  NoGradGuard no_grad;
  const nn::GPTConfig& g = model.config();
  const nn::AttentionConfig& a = g.attention;
  check_gpt2_expressible(g);
  std::map<std::string, Tensor> s;
  for (auto& [name, t] : model.state_dict()) s[name] = t.to(kCPU).to(DType::f32).contiguous();
  std::vector<std::pair<std::string, Tensor>> out;
  const auto put = [&](const std::string& name, const Tensor& t) { out.emplace_back("transformer." + name, t); };
  put("wte.weight", s.at("wte.weight"));
  put("wpe.weight", s.at("wpe.weight"));
  put("ln_f.weight", s.at("ln_f.weight"));
  put("ln_f.bias", s.at("ln_f.bias"));
  for (int64_t i = 0; i < g.layers; ++i) {
    const std::string h = cat("h.", i, "."), b = cat("blocks.", i, ".");
    for (const auto& [to, from] : {std::pair{"ln_1", "ln1"}, std::pair{"ln_2", "ln2"}}) {
      put(h + to + ".weight", s.at(b + from + ".weight"));
      put(h + to + ".bias", s.at(b + from + ".bias"));
    }
    const auto roles = role_weights(s, b + "attn.", a, /*repeat_kv_heads=*/true);
    put(h + "attn.c_attn.weight", transposed(concat({roles[0].weight, roles[1].weight, roles[2].weight}, 0)));
    put(h + "attn.c_attn.bias", concat({roles[0].bias, roles[1].bias, roles[2].bias}, 0));
    put(h + "attn.c_proj.weight", transposed(s.at(b + "attn.o.weight")));
    put(h + "attn.c_proj.bias", a.bias ? s.at(b + "attn.o.bias") : zeros({a.d_model}));
    put(h + "mlp.c_fc.weight", transposed(s.at(b + "fc.weight")));
    put(h + "mlp.c_fc.bias", s.at(b + "fc.bias"));
    put(h + "mlp.c_proj.weight", transposed(s.at(b + "proj.weight")));
    put(h + "mlp.c_proj.bias", s.at(b + "proj.bias"));
  }
  return out;
}

}  // namespace qkv::infer
