#include "lab/infer/hf/tensors.h"

#include <cstring>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "io/json_read.h"
#include "io/safetensors.h"

namespace qkv::infer {

namespace fs = std::filesystem;

namespace {

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

}  // namespace

std::array<RoleWeights, 3> role_weights(const std::map<std::string, Tensor>& s, const std::string& at,
                                        const nn::AttentionConfig& a, bool repeat_kv_heads) {
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
    if (!query_wide && repeat_kv_heads) {
      w = repeat_heads(w, hk, a.heads / hk);
      b = repeat_heads(b, hk, a.heads / hk);
    }
    out[size_t(r)] = {w.contiguous(), b.contiguous()};
  }
  return out;
}

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

const HfTensor& HfSource::at(const std::string& name) const {
  const auto it = tensors.find(prefix + name);
  check<IOError>(it != tensors.end(), where, ": tensor '", prefix + name, "' is missing");
  return it->second;
}

Tensor HfSource::get(const std::string& name, const Shape& shape) {
  used.insert(prefix + name);
  const HfTensor& t = at(name);
  const DType dt = t.value.dtype();
  check<IOError>(dt == DType::f32 || dt == DType::f16 || dt == DType::bf16 || dt == DType::f64, t.file, ": tensor '",
                 prefix + name, "': dtype ", safetensors::dtype_code(dt),
                 ", expected a floating dtype (F32, F16, BF16, F64)");
  check<IOError>(t.value.shape() == shape, t.file, ": tensor '", prefix + name, "': shape ", shape_str(t.value.shape()),
                 ", expected ", shape_str(shape), " (from config.json)");
  return t.value.to(DType::f32).contiguous();
}

void HfSource::check_all_used(const std::string& model) const {
  for (const auto& [name, t] : tensors)
    check<IOError>(used.contains(name), t.file, ": tensor '", name, "' is not part of ", model,
                   "; a model with another head or extra weights is not supported");
}

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

}  // namespace qkv::infer
