// Hydra-style overrides: `key=value` arguments (the value is YAML: 128, cuda:0, [0,1]) and the
// dotted-key assignment into a tree that both they and the scales of an experiment file use.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "lab/experiment/config.h"

namespace qkv::experiment {

struct Override {
  std::string arg;  // as given: "model.d_model=128"
  std::string key;  // "model.d_model"
  Node value;       // parsed YAML; its source names the argument
};

// Splits at the first '=' and parses the value as YAML. ConfigError naming the argument when
// there is no '=', the key is empty, or the value is not valid YAML.
Override parse_override(const std::string& arg);

// Whether a command-line argument is an override rather than a file: an '=' after a dotted key
// of letters, digits and '_' ("model.d_model=128"), so that a path holding '=' is a file
// ("runs/lm/shakespeare/Q-K=V/seed0/config.yaml").
bool is_override(std::string_view arg);
// The arguments in order, overrides to `overrides` and the rest to `files`.
void split_arguments(const std::vector<std::string>& args, std::vector<std::string>& files,
                     std::vector<std::string>& overrides);

// "sweep.grid.model.d_model" -> {"sweep", "grid", "model.d_model"}: a grid key is one part.
std::vector<std::string> split_key(std::string_view dotted);

// Throws ConfigError at `where` unless `dotted` is a key (leaf or section) of the family `kind`
// or a grid entry "sweep.grid.<leaf key>"; the message names the family a key of another family
// belongs to, or suggests the closest valid key.
void check_key(TaskKind kind, const std::string& dotted, const Source& where);

// Sets `dotted` in the tree, creating maps on the way. A map value merges into an existing map
// key by key; anything else replaces what was there. `where` is the source of the assignment.
void set_key(Node& tree, const std::string& dotted, Node value, const Source& where);

}  // namespace qkv::experiment
