// Parsing `key=value` overrides, checking dotted keys against the schema, and assigning them
// into a configuration tree.
#include "lab/experiment/overrides.h"

#include <cctype>

namespace qkv::experiment {

Override parse_override(const std::string& arg) {
  const Source where{cat("command-line override '", arg, "'")};
  const size_t eq = arg.find('=');
  if (eq == std::string::npos) fail_at(where, "expected key=value, e.g. model.d_model=128 (no '=' found)");
  Override o{arg, arg.substr(0, eq), Node{}};
  if (o.key.empty()) fail_at(where, "expected key=value, e.g. model.d_model=128 (the key is empty)");
  o.value = parse_yaml(arg.substr(eq + 1), where.origin);  // a syntax error names the argument
  o.value.set_source(where);
  return o;
}

bool is_override(std::string_view arg) {
  const size_t eq = arg.find('=');
  if (eq == std::string_view::npos || eq == 0) return false;
  for (char c : arg.substr(0, eq))
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.')) return false;
  return true;
}

void split_arguments(const std::vector<std::string>& args, std::vector<std::string>& files,
                     std::vector<std::string>& overrides) {
  for (const std::string& a : args) (is_override(a) ? overrides : files).push_back(a);
}

std::vector<std::string> split_key(std::string_view dotted) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    if (parts.size() == 2 && parts[0] == "sweep" && parts[1] == "grid") {
      parts.emplace_back(dotted.substr(start));
      return parts;
    }
    const size_t dot = dotted.find('.', start);
    parts.emplace_back(dotted.substr(start, dot == std::string_view::npos ? dot : dot - start));
    if (dot == std::string_view::npos) return parts;
    start = dot + 1;
  }
}

void check_key(TaskKind kind, const std::string& dotted, const Source& where) {
  const std::string family(enum_name(kind));
  std::vector<std::string> keys, leaves;
  for (const KeyInfo& k : family_keys(kind)) {
    keys.push_back(k.key);
    if (!k.section) leaves.push_back(k.key);
  }
  const bool grid = dotted.starts_with("sweep.grid.");
  const std::string key = grid ? dotted.substr(11) : dotted;
  const KeyInfo* info = find_key(kind, key);
  if (info && (!grid || !info->section)) return;
  if (const std::string why = key_set_elsewhere(key); !why.empty()) fail_at(where, dotted, ": ", key, " ", why);
  std::string elsewhere;  // the families that have the key
  for (TaskKind other : {TaskKind::synthetic, TaskKind::vision, TaskKind::anomaly, TaskKind::lm})
    if (other != kind && find_key(other, key)) elsewhere += cat(elsewhere.empty() ? "" : ", ", enum_name(other));
  if (!elsewhere.empty())
    fail_at(where, dotted, ": ", key, " is not a setting of ", family, " experiments (task.kind: ", family,
            "); it belongs to ", elsewhere, " experiments");
  const std::string suggestion = closest_key(key, grid ? leaves : keys);
  if (!suggestion.empty())
    fail_at(where, "unknown key '", dotted, "'; did you mean '", grid ? "sweep.grid." : "", suggestion, "'?");
  fail_at(where, "unknown key '", dotted, "' (`qkvlab keys ", family, "` lists the keys of ", family, " experiments)");
}

namespace {

void assign(Node& slot, Node value, const Source& where) {
  if (slot.is_map() && value.is_map()) {
    for (Entry& e : value.entries) {
      if (Entry* existing = slot.find(e.key)) {
        existing->source = e.source;
        assign(existing->value, std::move(e.value), where);
      } else {
        slot.add(e.key, std::move(e.value), e.source);
      }
    }
    return;
  }
  slot = std::move(value);
}

}  // namespace

void set_key(Node& tree, const std::string& dotted, Node value, const Source& where) {
  const std::vector<std::string> parts = split_key(dotted);
  Node* at = &tree;
  std::string walked;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (at->is_null()) *at = Node::map(where);
    if (!at->is_map())
      fail_at(where, "cannot set '", dotted, "': '", walked, "' is ", at->describe(), " (from ", at->source.str(),
              "), not a map");
    {
      if (i) walked += ".";
      walked += parts[i];
    }
    Entry* e = at->find(parts[i]);
    if (!e) {
      e = &at->entries.emplace_back(Entry{parts[i], where, Node{}});
      e->value.source = where;
    } else if (i + 1 == parts.size()) {
      e->source = where;
    }
    at = &e->value;
  }
  assign(*at, std::move(value), where);
}

}  // namespace qkv::experiment
