// The non-template parts of the schema machinery: messages for unknown keys and for rules that
// involve several fields.
#include "lab/experiment/schema.h"

namespace qkv::experiment {

std::string key_set_elsewhere(std::string_view dotted) {
  if (dotted == "model.sharing" || dotted == "model.pos2d" || dotted == "model.kv_heads")
    return "is set by the variant: list variants such as Q-K=V, (Q=K-V)+, GQA-4 under sweep.variants";
  if (dotted == "train.seed") return "is set by the seed: list seeds under sweep.seeds";
  return "";
}

void Located::fail_key(const std::string& key, const std::string& value, const std::string& expected) const {
  // Walk the dotted key down the tree; stop where it was not written (left at its default).
  const Node* at = &map_;
  Source where = map_.source;
  bool written = true;
  size_t start = 0;
  while (written) {
    const size_t dot = key.find('.', start);
    const Entry* e = at->is_map() ? at->find(key.substr(start, dot == std::string::npos ? dot : dot - start)) : nullptr;
    if (!e) {
      written = false;
      break;
    }
    at = &e->value;
    where = e->value.source.line > 0 || e->value.source.origin.size() ? e->value.source : e->source;
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  fail_at(where, prefix_ + key, ": ", value, written ? "" : " (the default)", " is not valid: expected ", expected);
}

const KeyInfo* ParseContext::find(std::string_view dotted) const {
  for (const KeyInfo& k : keys)
    if (k.key == dotted) return &k;
  return nullptr;
}

void fail_unknown_key(const Entry& e, const std::string& dotted, const std::vector<std::string>& siblings,
                      const ParseContext& ctx) {
  if (const std::string why = key_set_elsewhere(dotted); !why.empty()) fail_at(e.source, dotted, ": ", why);
  if (auto it = ctx.elsewhere.find(dotted); it != ctx.elsewhere.end())
    fail_at(e.source, dotted, " is not a setting of ", ctx.family, " experiments (task.kind: ", ctx.family,
            "); it belongs to ", it->second, " experiments");
  std::vector<std::string> names;
  for (const KeyInfo& k : ctx.keys) names.push_back(k.key);
  std::string suggestion = closest_key(dotted, names);
  if (!suggestion.empty()) fail_at(e.source, "unknown key '", dotted, "'; did you mean '", suggestion, "'?");
  std::string valid;
  for (size_t i = 0; i < siblings.size(); ++i) {
    if (i) valid += ", ";
    valid += siblings[i];
  }
  fail_at(e.source, "unknown key '", dotted, "'; valid keys here: ", valid);
}

}  // namespace qkv::experiment
