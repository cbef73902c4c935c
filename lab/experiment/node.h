// Node: the configuration tree read from YAML before it is checked against the schema. Every
// node and every map key remembers its Source (file, line, column) so that errors found later
// (an unknown key, a bad value, a failing sweep run) can point at the text that caused them.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "lab/experiment/config_error.h"

namespace qkv::experiment {

struct Entry;

struct Node {
  enum class Kind { null, scalar, sequence, map };

  Kind kind = Kind::null;
  std::string text;            // scalar: the text as written, without quotes
  bool quoted = false;         // scalar: written in quotes (a YAML string, never a number)
  std::vector<Node> items;     // sequence
  std::vector<Entry> entries;  // map, in file order; keys are unique
  Source source;

  static Node scalar(std::string text, Source source = {}, bool quoted = false);
  static Node sequence(std::vector<Node> items, Source source = {});
  static Node map(Source source = {});

  bool is_null() const { return kind == Kind::null; }
  bool is_scalar() const { return kind == Kind::scalar; }
  bool is_sequence() const { return kind == Kind::sequence; }
  bool is_map() const { return kind == Kind::map; }

  // The entry under `key` in a map, or nullptr.
  const Entry* find(std::string_view key) const;
  Entry* find(std::string_view key);
  // Appends an entry to a map (the caller makes sure the key is new); returns its value.
  Node& add(std::string key, Node value, Source key_source);
  // Removes the entry under `key` from a map, if present.
  void erase(std::string_view key);

  // Short flow-style text for messages: 64, 'abc', [1, 2], {a: 1}, null.
  std::string describe() const;
  // Gives this node and everything below it the same source.
  void set_source(const Source& where);
};

struct Entry {
  std::string key;
  Source source;  // where the key was written
  Node value;
};

// Equal structure and text; sources and quoting are ignored.
bool operator==(const Node& a, const Node& b);

// Reads a YAML file into a tree. IOError when the file cannot be read, ConfigError (with file
// and line) for a YAML syntax error, a duplicate key or a key that is not a scalar.
Node load_yaml_file(const std::string& path);
// The same for text; `origin` names it in sources and messages.
Node parse_yaml(const std::string& text, const std::string& origin);
// Block-style YAML for a tree (lists of scalars in flow style); parse_yaml reads it back equal.
std::string emit_yaml(const Node& root);

}  // namespace qkv::experiment
