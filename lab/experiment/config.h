// An experiment file, parsed: task.kind selects the family (families.h), whose struct holds the
// sections that family accepts. Parsing is strict: an unknown key, a key of another family, a bad
// value or a missing required key throws ConfigError naming file, line, dotted key, value and
// what was expected; a key of another family names the families it belongs to.
#pragma once
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "lab/experiment/families.h"

namespace qkv::experiment {

using Family = std::variant<SyntheticConfig, VisionConfig, AnomalyConfig, LmConfig>;

struct Config {
  Family family;

  TaskKind kind() const;
  const std::string& name() const;
  const SweepConfig& sweep() const;
  const LoopConfig& loop() const;  // train.*: batch sizes, device, threads, logging
  // The family's struct; ValueError naming both kinds when the config is of another family.
  template <class F> const F& as() const {
    if (const F* f = std::get_if<F>(&family)) return *f;
    throw ValueError(cat("experiment '", name(), "' is a ", enum_name(kind()), " experiment (task.kind), not ",
                         enum_name(F::kKind)));
  }
  bool operator==(const Config&) const = default;
};

// task.kind of a tree, synthetic when absent; ConfigError at its source when it names no family.
TaskKind family_of(const Node& tree);

// Strict parse of a whole tree (no `scales`) with the schema of its family.
Config parse_config(const Node& tree);
Config config_from_yaml(const std::string& text, const std::string& origin = "<string>");
// A run folder's config.yaml.
Config load_config_file(const std::string& path);
Node config_to_tree(const Config& config);
// Every key with its value, in schema order; config_from_yaml reads it back equal.
std::string to_yaml(const Config& config);

// Every key of a family (sections before their keys, in declaration order).
const std::vector<KeyInfo>& family_keys(TaskKind kind);
const KeyInfo* find_key(TaskKind kind, std::string_view dotted);
// One line per key of the family: key, type, default, doc.
std::string describe_schema(TaskKind kind);

// What a run's variant must satisfy in its config: KV heads that divide model.heads, and 2D
// positional scores only where attention is non-causal (not for language models). `where` is
// the variant's source in sweep.variants.
void check_variant(const Config& config, const nn::Variant& variant, const Source& where);

}  // namespace qkv::experiment
