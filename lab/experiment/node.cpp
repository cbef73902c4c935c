// Node: construction, lookup, message text, and conversion from and to yaml-cpp documents.
#include "lab/experiment/node.h"
#include "io/input_file.h"

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>

#include <fstream>
#include <sstream>

namespace qkv::experiment {

Node Node::scalar(std::string text, Source source, bool quoted) {
  Node n;
  n.kind = Kind::scalar;
  n.text = std::move(text);
  n.quoted = quoted;
  n.source = std::move(source);
  return n;
}

Node Node::sequence(std::vector<Node> items, Source source) {
  Node n;
  n.kind = Kind::sequence;
  n.items = std::move(items);
  n.source = std::move(source);
  return n;
}

Node Node::map(Source source) {
  Node n;
  n.kind = Kind::map;
  n.source = std::move(source);
  return n;
}

const Entry* Node::find(std::string_view key) const {
  for (const Entry& e : entries)
    if (e.key == key) return &e;
  return nullptr;
}

Entry* Node::find(std::string_view key) {
  for (Entry& e : entries)
    if (e.key == key) return &e;
  return nullptr;
}

Node& Node::add(std::string key, Node value, Source key_source) {
  entries.push_back(Entry{std::move(key), std::move(key_source), std::move(value)});
  return entries.back().value;
}

void Node::erase(std::string_view key) {
  std::erase_if(entries, [&](const Entry& e) { return e.key == key; });
}

std::string Node::describe() const {
  switch (kind) {
    case Kind::null: return "null";
    case Kind::scalar: return quoted ? "'" + text + "'" : text;
    case Kind::sequence: {
      std::string s = "[";
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) s += ", ";
        s += items[i].describe();
      }
      return s + "]";
    }
    case Kind::map: {
      std::string s = "{";
      for (size_t i = 0; i < entries.size(); ++i) {
        if (i) s += ", ";
        s += entries[i].key + ": " + entries[i].value.describe();
      }
      return s + "}";
    }
  }
  return "";
}

void Node::set_source(const Source& where) {
  source = where;
  for (Node& item : items) item.set_source(where);
  for (Entry& e : entries) {
    e.source = where;
    e.value.set_source(where);
  }
}

bool operator==(const Node& a, const Node& b) {
  if (a.kind != b.kind || a.text != b.text || a.items != b.items) return false;
  if (a.entries.size() != b.entries.size()) return false;
  for (size_t i = 0; i < a.entries.size(); ++i)
    if (a.entries[i].key != b.entries[i].key || !(a.entries[i].value == b.entries[i].value)) return false;
  return true;
}

namespace {

Source source_of(const YAML::Mark& mark, const std::string& origin) {
  if (mark.is_null()) return Source{origin};
  return Source{origin, mark.line + 1, mark.column + 1};
}

// Experiment files nest a few levels deep. The bounds turn a self-referencing alias
// (`a: &a [*a]`, which yaml-cpp loads as a cycle) and a "billion laughs" file (aliases of
// aliases, a few hundred bytes that expand to billions of values) into errors.
constexpr int kMaxDepth = 64;
constexpr uint64_t kMaxYamlBytes = uint64_t(16) << 20;
constexpr int64_t kMaxValues = 100'000;

struct Converter {
  const std::string& origin;
  int64_t values = 0;

  // `fallback` is the key's position: yaml-cpp places an empty value at the start of the next line.
  Node convert(const YAML::Node& y, const Source& fallback, int depth) {
    if (depth > kMaxDepth)
      fail_at(fallback, "values nested deeper than ", kMaxDepth, " levels (an alias that refers to itself?)");
    if (++values > kMaxValues)
      fail_at(fallback, "the document expands to more than ", kMaxValues, " values (aliases repeating large values?)");
    switch (y.Type()) {
      case YAML::NodeType::Scalar: return Node::scalar(y.Scalar(), source_of(y.Mark(), origin), y.Tag() == "!");
      case YAML::NodeType::Sequence: {
        Node n = Node::sequence({}, source_of(y.Mark(), origin));
        for (const YAML::Node& item : y) n.items.push_back(convert(item, source_of(item.Mark(), origin), depth + 1));
        return n;
      }
      case YAML::NodeType::Map: {
        Node n = Node::map(source_of(y.Mark(), origin));
        for (auto it = y.begin(); it != y.end(); ++it) {
          Source key_source = source_of(it->first.Mark(), origin);
          if (!it->first.IsScalar())
            fail_at(key_source, "map keys must be plain names, not a ", it->first.IsMap() ? "map" : "list");
          const std::string key = it->first.Scalar();
          if (const Entry* seen = n.find(key))
            fail_at(key_source, "duplicate key '", key, "' (first given at ", seen->source.str(), ")");
          n.add(key, convert(it->second, key_source, depth + 1), key_source);
        }
        return n;
      }
      case YAML::NodeType::Null:
      case YAML::NodeType::Undefined: {
        Node n;
        n.source = fallback;
        return n;
      }
    }
    return Node{};
  }
};

void emit(YAML::Emitter& out, const Node& n) {
  switch (n.kind) {
    case Node::Kind::null: out << YAML::Null; break;
    case Node::Kind::scalar:
      if (n.quoted) out << YAML::DoubleQuoted;
      out << n.text;
      break;
    case Node::Kind::sequence: {
      bool flat = true;
      for (const Node& item : n.items) flat = flat && !item.is_sequence() && !item.is_map();
      if (flat) out << YAML::Flow;
      out << YAML::BeginSeq;
      for (const Node& item : n.items) emit(out, item);
      out << YAML::EndSeq;
      break;
    }
    case Node::Kind::map:
      if (n.entries.empty()) out << YAML::Flow;
      out << YAML::BeginMap;
      for (const Entry& e : n.entries) {
        out << YAML::Key << e.key << YAML::Value;
        emit(out, e.value);
      }
      out << YAML::EndMap;
      break;
  }
}

}  // namespace

Node parse_yaml(const std::string& text, const std::string& origin) {
  YAML::Node doc;
  try {
    doc = YAML::Load(text);
  } catch (const YAML::DeepRecursion& e) {
    fail_at(source_of(e.mark, origin), "values nested too deeply (", e.depth(), " levels) for a configuration");
  } catch (const YAML::Exception& e) { fail_at(source_of(e.mark, origin), "YAML syntax error: ", e.msg); }
  return Converter{origin}.convert(doc, Source{origin}, 0);
}

Node load_yaml_file(const std::string& path) {
  const uint64_t size = regular_file_size(path, "a YAML configuration file");
  check<IOError>(size <= kMaxYamlBytes, path, ": ", size, " bytes is larger than a configuration file can be (at most ",
                 kMaxYamlBytes, ")");
  std::ifstream in(path, std::ios::binary);
  check<IOError>(bool(in), path, ": cannot open the configuration file");
  std::ostringstream text;
  text << in.rdbuf();
  check<IOError>(!in.bad(), path, ": cannot read the configuration file");
  return parse_yaml(text.str(), path);
}

std::string emit_yaml(const Node& root) {
  YAML::Emitter out;
  emit(out, root);
  check<ValueError>(out.good(), "emit_yaml: yaml-cpp could not write the tree: ", out.GetLastError());
  return std::string(out.c_str()) + "\n";
}

}  // namespace qkv::experiment
