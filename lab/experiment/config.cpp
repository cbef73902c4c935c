// Choosing the family of a tree, parsing it with that family's schema, writing it back, listing
// and describing the keys of each family, and the checks of a run's variant.
#include "lab/experiment/config.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

namespace qkv::experiment {

namespace {

// Calls f(F{}) with a value of the family struct of `kind` (for its type).
template <class Fn> decltype(auto) with_family(TaskKind kind, Fn&& f) {
  switch (kind) {
    case TaskKind::synthetic: return f(SyntheticConfig{});
    case TaskKind::vision: return f(VisionConfig{});
    case TaskKind::anomaly: return f(AnomalyConfig{});
    case TaskKind::lm: return f(LmConfig{});
  }
  throw ValueError("unknown task kind");
}

constexpr TaskKind kKinds[] = {TaskKind::synthetic, TaskKind::vision, TaskKind::anomaly, TaskKind::lm};

// The parse context of a family: its keys, and every other family's keys that it lacks.
const ParseContext& context(TaskKind kind) {
  static const std::map<TaskKind, ParseContext> contexts = [] {
    std::map<TaskKind, ParseContext> out;
    for (TaskKind k : kKinds) {
      ParseContext& c = out[k];
      c.family = std::string(enum_name(k));
      c.keys = family_keys(k);
    }
    for (TaskKind k : kKinds)
      for (TaskKind other : kKinds) {
        if (other == k) continue;
        for (const KeyInfo& info : out[other].keys) {
          if (out[k].find(info.key)) continue;
          std::string& where = out[k].elsewhere[info.key];
          where += cat(where.empty() ? "" : ", ", enum_name(other));
        }
      }
    return out;
  }();
  return contexts.at(kind);
}

}  // namespace

TaskKind Config::kind() const {
  return std::visit([](const auto& f) { return std::decay_t<decltype(f)>::kKind; }, family);
}
const std::string& Config::name() const {
  return std::visit([](const auto& f) -> const std::string& { return f.name; }, family);
}
const SweepConfig& Config::sweep() const {
  return std::visit([](const auto& f) -> const SweepConfig& { return f.sweep; }, family);
}
const LoopConfig& Config::loop() const {
  return std::visit([](const auto& f) -> const LoopConfig& { return f.train; }, family);
}

TaskKind family_of(const Node& tree) {
  const Entry* task = tree.is_map() ? tree.find("task") : nullptr;
  const Entry* kind = task && task->value.is_map() ? task->value.find("kind") : nullptr;
  if (!kind) return TaskKind::synthetic;
  const Node& n = kind->value;
  if (n.is_scalar())
    if (auto k = enum_from_name<TaskKind>(n.text)) return *k;
  fail_at(n.source, "task.kind: ", n.describe(), " is not valid: expected ", Codec<TaskKind>::type(),
          " (the task family decides which keys the file takes)");
}

Config parse_config(const Node& tree) {
  const TaskKind kind = family_of(tree);
  return with_family(kind, [&](auto f) { return Config{parse_struct<decltype(f)>(tree, "", context(kind))}; });
}

Config config_from_yaml(const std::string& text, const std::string& origin) {
  return parse_config(parse_yaml(text, origin));
}

Config load_config_file(const std::string& path) {
  std::ifstream in(path);
  check<IOError>(bool(in), path, ": cannot read the run's configuration");
  std::stringstream text;
  text << in.rdbuf();
  return config_from_yaml(text.str(), path);
}

Node config_to_tree(const Config& config) {
  return std::visit([](const auto& f) { return emit_struct(f); }, config.family);
}

std::string to_yaml(const Config& config) { return emit_yaml(config_to_tree(config)); }

const std::vector<KeyInfo>& family_keys(TaskKind kind) {
  static const std::map<TaskKind, std::vector<KeyInfo>> keys = [] {
    std::map<TaskKind, std::vector<KeyInfo>> out;
    for (TaskKind k : kKinds) with_family(k, [&](auto f) { flatten_keys<decltype(f)>("", out[k]); });
    return out;
  }();
  return keys.at(kind);
}

const KeyInfo* find_key(TaskKind kind, std::string_view dotted) { return context(kind).find(dotted); }

std::string describe_schema(TaskKind kind) {
  const auto& keys = family_keys(kind);
  size_t key_w = 0, type_w = 0;
  for (const KeyInfo& k : keys) {
    if (k.section) continue;
    key_w = std::max(key_w, k.key.size());
    type_w = std::max(type_w, k.type.size());
  }
  type_w = std::min<size_t>(type_w, 44);  // longer types push their line's default along
  auto pad = [](const std::string& s, size_t w) { return s + std::string(w > s.size() ? w - s.size() : 0, ' '); };
  std::string out = cat("Keys of ", enum_name(kind), " experiments (task.kind: ", enum_name(kind),
                        "; dotted key, type, default, meaning):\n");
  for (const KeyInfo& k : keys) {
    if (k.section) {
      out += "\n" + k.key + ": " + k.doc + "\n";
      continue;
    }
    const std::string def = k.default_text == "required" ? "required" : "default " + k.default_text;
    out += "  " + pad(k.key, key_w) + "  " + pad(k.type, type_w) + "  " + def + "  " + k.doc + "\n";
  }
  out +=
      "\nscales: name -> {dotted key: value}, applied over the file when the scale is chosen.\n"
      "Overrides key=value (YAML value) apply last: file < scale < overrides.\n"
      "Variants (sweep.variants): " +
      nn::accepted_variant_forms() + ".\n";
  return out;
}

void check_variant(const Config& config, const nn::Variant& v, const Source& where) {
  const int heads = std::visit([](const auto& f) { return f.model.heads; }, config.family);
  const std::string name = nn::variant_name(v);
  if (v.kv_heads > 0 && (v.kv_heads > heads || heads % v.kv_heads != 0))
    fail_at(where, "sweep.variants: ", name, " is not valid here: its ", v.kv_heads,
            " KV heads must divide model.heads = ", heads);
  if (v.pos2d && config.kind() == TaskKind::lm)
    fail_at(where, "sweep.variants: ", name,
            " is not valid here: the (+) variants' 2D scores are for non-causal "
            "tasks only, and language models are causal");
}

}  // namespace qkv::experiment
