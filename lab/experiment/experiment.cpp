// load_experiment (file < scale < overrides, then validation and sweep expansion) and
// load_suite.
#include "lab/experiment/experiment.h"

#include <filesystem>
#include <set>

#include "lab/experiment/overrides.h"

namespace qkv::experiment {

namespace {

// Takes the `scales` map out of the file's tree and checks every key of every scale against the
// file's family.
Node take_scales(Node& tree) {
  const TaskKind kind = family_of(tree);
  const Entry* e = tree.find("scales");
  if (!e) return Node::map(tree.source);
  Node scales = e->value;
  tree.erase("scales");
  if (scales.is_null()) return Node::map(tree.source);
  if (!scales.is_map())
    fail_at(scales.source, "scales: ", scales.describe(),
            " is not valid: expected a map from scale name to {dotted key: value}");
  for (const Entry& scale : scales.entries) {
    if (scale.value.is_null()) continue;
    if (!scale.value.is_map())
      fail_at(scale.value.source, "scales.", scale.key, ": ", scale.value.describe(),
              " is not valid: expected a map of dotted keys to values");
    for (const Entry& kv : scale.value.entries) check_key(kind, kv.key, kv.source);
  }
  return scales;
}

std::string names_of(const Node& map) {
  std::string s;
  for (size_t i = 0; i < map.entries.size(); ++i) {
    if (i) s += ", ";
    s += map.entries[i].key;
  }
  return s;
}

Node load_map(const std::string& path) {
  Node tree = load_yaml_file(path);
  if (tree.is_null()) tree = Node::map(Source{path, 1, 1});
  if (!tree.is_map()) fail_at(tree.source, "expected a map of keys at the top of the file, got ", tree.describe());
  return tree;
}

}  // namespace

std::vector<std::string> scale_names(const std::string& path) {
  Node tree = load_map(path);
  std::vector<std::string> names;
  for (const Entry& e : take_scales(tree).entries) names.push_back(e.key);
  return names;
}

Experiment load_experiment(const std::string& path, const std::string& scale,
                           const std::vector<std::string>& overrides) {
  Node tree = load_map(path);
  const Node scales = take_scales(tree);
  if (!scale.empty()) {
    const Entry* chosen = scales.find(scale);
    if (!chosen) {
      if (scales.entries.empty())
        throw ConfigError(cat(path, ": unknown scale '", scale, "': the file defines no scales"));
      throw ConfigError(cat(path, ": unknown scale '", scale, "'; the file defines: ", names_of(scales)));
    }
    for (const Entry& kv : chosen->value.entries) set_key(tree, kv.key, kv.value, kv.source);
  }
  std::vector<Override> parsed;
  for (const std::string& arg : overrides) {
    parsed.push_back(parse_override(arg));
    set_key(tree, parsed.back().key, parsed.back().value, parsed.back().value.source);
  }
  for (const Override& o : parsed) check_key(family_of(tree), o.key, o.value.source);
  Experiment ex{path, scale, parse_config(tree), {}};
  ex.runs = expand_tree(tree);
  for (Run& r : ex.runs) r.scale = scale;
  return ex;
}

Suite load_suite(const std::string& path) {
  namespace fs = std::filesystem;
  const Node tree = load_map(path);
  for (const Entry& e : tree.entries)
    if (e.key != "suite")
      fail_at(e.source, "unknown key '", e.key, "'",
              closest_key(e.key, {"suite"}).empty() ? "" : "; did you mean 'suite'?",
              " (a suite file is `suite: [a.yaml, b.yaml]`)");
  const Entry* list = tree.find("suite");
  if (!list) fail_at(tree.source, "missing required key 'suite' (a list of experiment files relative to this one)");
  const Node& files = list->value;
  if (!files.is_sequence() || files.items.empty())
    fail_at(files.source, "suite: ", files.describe(), " is not valid: expected a non-empty list of experiment files");
  Suite suite{path, {}};
  std::set<std::string> seen;
  const fs::path dir = fs::path(path).parent_path();
  for (const Node& f : files.items) {
    if (!f.is_scalar() || f.text.empty())
      fail_at(f.source, "suite: ", f.describe(), " is not valid: expected a file name");
    const std::string resolved = (dir / f.text).lexically_normal().string();
    if (!seen.insert(resolved).second) fail_at(f.source, "suite: ", f.text, " is listed twice");
    if (!fs::is_regular_file(resolved))
      fail_at(f.source, "suite: ", f.text, ": no such file (looked for ", resolved, ")");
    suite.experiments.push_back(resolved);
  }
  return suite;
}

}  // namespace qkv::experiment
