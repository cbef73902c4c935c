#include "lab/infer/hf_gpt2_tensors.h"

#include <cstring>
#include <set>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "io/json_read.h"
#include "io/safetensors.h"

namespace qkv::infer {

namespace fs = std::filesystem;

namespace {

// ---- reading the folder -------------------------------------------------------------------

void add_file(HfTensors& out, const fs::path& file) {
  for (auto& [name, t] : safetensors::load(file.string())) out[name] = {std::move(t), file.string()};
}

HfTensors read_sharded(const fs::path& folder, const fs::path& index) {
  const nlohmann::json j = read_json_file(index, "a sharded checkpoint's index", uint64_t(64) << 20);
  const std::string file = index.string();
  check<IOError>(j.is_object() && j.contains("weight_map") && j["weight_map"].is_object(), file,
                 ": key 'weight_map': missing; expected {tensor name: shard file}");
  std::map<std::string, std::set<std::string>> by_shard;
  for (const auto& [name, shard] : j["weight_map"].items()) {
    check<IOError>(shard.is_string(), file, ": key 'weight_map.", name, "': expected a file name, got ", shard.dump());
    const std::string s = shard.get<std::string>();
    check<IOError>(!s.empty() && fs::path(s).filename() == fs::path(s) && s != "." && s != "..", file,
                   ": key 'weight_map.", name, "': ", shard.dump(), " is not a file name in the folder");
    by_shard[s].insert(name);
  }
  for (const auto& [shard, names] : by_shard) {
    std::error_code ec;  // a name too long for the file system is a shard that is not there
    check<IOError>(fs::is_regular_file(folder / shard, ec), file, ": shard ", shard, " (of '", *names.begin(),
                   "') is missing");
  }
  HfTensors out;
  for (const auto& [shard, names] : by_shard) {
    const fs::path path = folder / shard;
    HfTensors part;
    add_file(part, path);
    for (const std::string& name : names)
      check<IOError>(part.contains(name), file, ": key 'weight_map.", name, "': shard ", path.string(),
                     " holds no tensor of that name");
    for (auto& [name, t] : part) {
      check<IOError>(names.contains(name), path.string(), ": tensor '", name, "' is not listed in ", file,
                     " (its weight_map puts it elsewhere or nowhere)");
      out[name] = std::move(t);
    }
  }
  return out;
}

// ---- import -------------------------------------------------------------------------------

struct Source {
  const HfTensors& tensors;
  std::string prefix;  // "transformer." or ""
  std::string where;   // the folder's files, for a missing tensor

  const HfTensor& at(const std::string& name) const {
    const auto it = tensors.find(prefix + name);
    check<IOError>(it != tensors.end(), where, ": tensor '", prefix + name, "' is missing");
    return it->second;
  }
  // The tensor as float32, checked to have `shape`.
  Tensor get(const std::string& name, const Shape& shape) const {
    const HfTensor& t = at(name);
    const DType dt = t.value.dtype();
    check<IOError>(dt == DType::f32 || dt == DType::f16 || dt == DType::bf16 || dt == DType::f64, t.file, ": tensor '",
                   prefix + name, "': dtype ", safetensors::dtype_code(dt),
                   ", expected a floating dtype (F32, F16, BF16, F64)");
    check<IOError>(t.value.shape() == shape, t.file, ": tensor '", prefix + name, "': shape ",
                   shape_str(t.value.shape()), ", expected ", shape_str(shape), " (from config.json)");
    return t.value.to(DType::f32).contiguous();
  }
};

Tensor transposed(const Tensor& t) { return t.transpose(0, 1).contiguous(); }

std::string files_of(const HfTensors& tensors) {
  std::set<std::string> files;
  for (const auto& [name, t] : tensors) files.insert(t.file);
  std::string out;
  for (const auto& f : files) out += (out.empty() ? "" : ", ") + f;
  return out;
}

bool same_values(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.raw_data(), b.raw_data(), size_t(a.numel()) * sizeof(float)) == 0;
}

// ---- export -------------------------------------------------------------------------------

// A KV-head-wide projection [Hk dh, ...] with each head repeated for its `group` query heads
// (query head h reads KV head h / group).
Tensor repeat_heads(const Tensor& t, int64_t kv_heads, int64_t group) {
  if (group == 1) return t;
  Shape split = t.shape();
  split[0] = t.size(0) / kv_heads;
  split.insert(split.begin(), kv_heads);
  Shape wide = split;
  wide.insert(wide.begin() + 1, group);
  Shape out = t.shape();
  out[0] *= group;
  return t.reshape(split).unsqueeze(1).expand(wide).contiguous().reshape(out);
}

struct RoleWeights {
  Tensor weight, bias;  // [d, d] ([out, in]) and [d]
};

// Q, K and V of one layer as full-width, all-head projections.
std::array<RoleWeights, 3> role_weights(const std::map<std::string, Tensor>& s, const std::string& at,
                                        const nn::AttentionConfig& a) {
  const nn::SharingPattern& p = a.pattern();
  const int64_t d = a.d_model, hk = a.kv_head_count(), dh = a.head_dim();
  std::array<RoleWeights, 3> out;
  for (nn::Role r : nn::kRoles) {
    const std::string slot = at + std::string(p.slot[size_t(r)]);
    Tensor w = s.at(slot + ".weight");
    Tensor b = a.bias ? s.at(slot + ".bias") : zeros({w.size(0)});
    if (r == nn::Role::v && a.v_rank > 0) {  // V_h = K_h + (X A_h + a_h) B_h: fold A, B into V
      const Tensor A = s.at(at + "v_down.weight").reshape({hk, a.v_rank, d});
      const Tensor B = s.at(at + "v_up");  // [Hk, r, dh]
      w = (w.reshape({hk, dh, d}) + matmul(B, A, true, false)).reshape({hk * dh, d});
      if (a.bias) {
        const Tensor ab = s.at(at + "v_down.bias").reshape({hk, 1, a.v_rank});
        b = (b.reshape({hk, 1, dh}) + matmul(ab, B)).reshape({hk * dh});
      }
    }
    const bool query_wide = p.serves_query(p.slot_index(r));
    if (!query_wide) {
      w = repeat_heads(w, hk, a.heads / hk);
      b = repeat_heads(b, hk, a.heads / hk);
    }
    out[size_t(r)] = {w.contiguous(), b.contiguous()};
  }
  return out;
}

}  // namespace

HfTensors read_hf_tensors(const fs::path& folder) {
  const fs::path single = folder / "model.safetensors", index = folder / "model.safetensors.index.json";
  if (fs::exists(single)) {
    HfTensors out;
    add_file(out, single);
    return out;
  }
  if (fs::exists(index)) return read_sharded(folder, index);
  check<IOError>(!fs::exists(folder / "pytorch_model.bin"), (folder / "pytorch_model.bin").string(),
                 ": pickled PyTorch checkpoints are not read; save the model with safe_serialization=True ",
                 "(transformers' default since 4.35) to get model.safetensors");
  throw IOError(cat(folder.string(), ": no model.safetensors or model.safetensors.index.json"));
}

std::map<std::string, Tensor> gpt_state_from_hf(const HfTensors& tensors, const HfGpt2Config& c) {
  NoGradGuard no_grad;
  const nn::GPTConfig& g = c.gpt;
  const int64_t d = g.d_model(), f = g.ffn_width();
  Source src{tensors, tensors.contains("transformer.wte.weight") ? "transformer." : "", files_of(tensors)};
  std::set<std::string> used;
  const auto get = [&](const std::string& name, const Shape& shape) {
    used.insert(src.prefix + name);
    return src.get(name, shape);
  };
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
    used.insert(src.prefix + h + "attn.bias");         // the causal mask buffer of older files
    used.insert(src.prefix + h + "attn.masked_bias");  // and its fill value
  }
  if (tensors.contains("lm_head.weight")) {
    used.insert("lm_head.weight");
    const HfTensor& head = tensors.at("lm_head.weight");
    check<IOError>(same_values(head.value.to(DType::f32).contiguous(), s["wte.weight"]), head.file,
                   ": tensor 'lm_head.weight' differs from '", src.prefix,
                   "wte.weight': an output layer apart from the token embedding is not supported (GPT-2 ties them)");
  } else {
    check<IOError>(c.tied_head, src.where, ": tensor 'lm_head.weight' is missing and config.json sets ",
                   "tie_word_embeddings to false");
  }
  for (const auto& [name, t] : tensors)
    check<IOError>(used.contains(name), t.file, ": tensor '", name, "' is not part of a GPT-2 with ", g.layers,
                   " layers (config.json: n_layer); a model with another head or extra weights is not supported");
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
    const auto roles = role_weights(s, b + "attn.", a);
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
