// The schema machinery: a configuration struct S lists its fields once, in
// `static const Schema<S>& schema()`, one line per field:
//
//   field("d_model", &ModelConfig::d_model, 64, at_least(1), "model width"),
//   section("model", &Config::model, "the encoder"),
//
// and parse_struct / emit_struct / flatten_keys derive strict parsing (unknown keys are errors
// with a suggestion, missing keys take the default), writing back, and the key listing.
#pragma once
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "lab/experiment/codec.h"
#include "lab/experiment/suggest.h"

namespace qkv::experiment {

// One key of the flattened schema, as describe_schema() lists it.
struct KeyInfo {
  std::string key;           // dotted: "model.d_model"
  std::string type;          // "integer >= 1"; "section" for a nested struct
  std::string default_text;  // "64", "required", "" for sections
  std::string doc;
  bool section = false;
  // Leaves: throws ConfigError unless `value` is valid for this key (`key` names it in messages).
  std::function<void(const Node& value, const std::string& key)> check;
};

// What parsing needs beyond the node: the family's keys (for "did you mean" and the sweep
// grid's checks) and where the keys of the other families belong (for "not a setting of ...").
struct ParseContext {
  std::string family;                            // "lm", as task.kind names it
  std::vector<KeyInfo> keys;                     // every key of the family, dotted
  std::map<std::string, std::string> elsewhere;  // another family's key -> "synthetic, vision"
  const KeyInfo* find(std::string_view dotted) const;
};

// The map a struct was parsed from, for rules that involve several fields.
class Located {
 public:
  Located(const Node& map, std::string prefix) : map_(map), prefix_(std::move(prefix)) {}
  // Throws "<where key was written>: <prefix><key>: <value> is not valid: expected <expected>";
  // `key` is relative and may be dotted ("schedule.min_lr"). A key left at its default is
  // reported at the enclosing map.
  template <class V> [[noreturn]] void fail(const std::string& key, const V& value, const std::string& expected) const {
    fail_key(key, cat(value), expected);
  }

 private:
  [[noreturn]] void fail_key(const std::string& key, const std::string& value, const std::string& expected) const;
  const Node& map_;
  std::string prefix_;
};

template <class S> struct FieldDef {
  std::string name;
  std::string doc;
  std::function<void(S&, const Node&, const std::string& key, const ParseContext&)> parse;
  std::function<void(S&)> set_default;  // empty: the key is required (or is a section)
  bool section = false;                 // a nested struct: absent means all its defaults
  std::function<Node(const S&)> emit;
  std::function<void(const std::string& prefix, std::vector<KeyInfo>&)> flatten;
};

template <class S> struct Schema {
  std::vector<FieldDef<S>> fields;
  std::function<void(const S&, const Located&)> check = {};  // rules across fields
};

// A value field with a default and a rule.
template <class S, class T>
FieldDef<S> field(std::string name, T S::*member, std::type_identity_t<T> def, std::type_identity_t<Rule<T>> rule,
                  std::string doc) {
  FieldDef<S> f;
  f.name = name;
  f.doc = doc;
  f.parse = [member, rule](S& s, const Node& n, const std::string& key, const ParseContext&) {
    parse_value(n, s.*member, rule, key);
  };
  f.set_default = [member, def](S& s) { s.*member = def; };
  f.emit = [member](const S& s) { return Codec<T>::emit(s.*member); };
  auto check = [rule](const Node& n, const std::string& key) {
    T tmp{};
    parse_value(n, tmp, rule, key);
  };
  f.flatten = [name, doc, rule, check, def_text = Codec<T>::emit(def).describe()](const std::string& prefix,
                                                                                  std::vector<KeyInfo>& out) {
    out.push_back(KeyInfo{prefix + name, expected_form(rule), def_text, doc, false, check});
  };
  return f;
}

// A value field with a default and no rule beyond its type.
template <class S, class T>
FieldDef<S> field(std::string name, T S::*member, std::type_identity_t<T> def, std::string doc) {
  return field<S, T>(std::move(name), member, std::move(def), Rule<T>{}, std::move(doc));
}

// A value field without a default: leaving it out is an error.
template <class S, class T>
FieldDef<S> required(std::string name, T S::*member, std::type_identity_t<Rule<T>> rule, std::string doc) {
  FieldDef<S> f = field<S, T>(name, member, T{}, rule, doc);
  f.set_default = {};
  auto flatten = f.flatten;
  f.flatten = [flatten](const std::string& prefix, std::vector<KeyInfo>& out) {
    flatten(prefix, out);
    out.back().default_text = "required";
  };
  return f;
}

template <class S, class T> FieldDef<S> required(std::string name, T S::*member, std::string doc) {
  return required<S, T>(std::move(name), member, Rule<T>{}, std::move(doc));
}

template <class S> S parse_struct(const Node& n, const std::string& key, const ParseContext& ctx);
template <class S> Node emit_struct(const S& s);
template <class S> void flatten_keys(const std::string& prefix, std::vector<KeyInfo>& out);

// The fields of a base struct's schema, for the schema of a struct derived from it: shared
// settings (the loop's batch size and device, a model's width and depth) are declared once.
template <class D, class B> std::vector<FieldDef<D>> inherit(const Schema<B>& base) {
  static_assert(std::is_base_of_v<B, D>);
  std::vector<FieldDef<D>> out;
  for (const FieldDef<B>& f : base.fields) {
    FieldDef<D> g;
    g.name = f.name;
    g.doc = f.doc;
    g.section = f.section;
    g.parse = [p = f.parse](D& d, const Node& n, const std::string& key, const ParseContext& c) { p(d, n, key, c); };
    if (f.set_default) g.set_default = [set = f.set_default](D& d) { set(d); };
    g.emit = [e = f.emit](const D& d) { return e(d); };
    g.flatten = f.flatten;
    out.push_back(std::move(g));
  }
  return out;
}

// `first` followed by `then`: a derived struct's own fields around the inherited ones.
template <class S>
std::vector<FieldDef<S>> fields(std::vector<FieldDef<S>> first, const std::vector<FieldDef<S>>& then) {
  first.insert(first.end(), then.begin(), then.end());
  return first;
}

// A nested struct with its own schema, written as a map under `name`.
template <class S, class T> FieldDef<S> section(std::string name, T S::*member, std::string doc) {
  FieldDef<S> f;
  f.name = name;
  f.doc = doc;
  f.parse = [member](S& s, const Node& n, const std::string& key, const ParseContext& ctx) {
    s.*member = parse_struct<T>(n, key, ctx);
  };
  f.section = true;
  f.emit = [member](const S& s) { return emit_struct(s.*member); };
  f.flatten = [name, doc](const std::string& prefix, std::vector<KeyInfo>& out) {
    out.push_back(KeyInfo{prefix + name, "section", "", doc, true, {}});
    flatten_keys<T>(prefix + name + ".", out);
  };
  return f;
}

// Every key of S's schema, sections before their keys, in declaration order.
template <class S> void flatten_keys(const std::string& prefix, std::vector<KeyInfo>& out) {
  for (const FieldDef<S>& f : S::schema().fields) f.flatten(prefix, out);
}

// Why a key that is not in the schema is set another way ("" for other keys): the variant sets
// the attention's sharing, 2D scores and KV heads, sweep.seeds the seed.
std::string key_set_elsewhere(std::string_view dotted);

[[noreturn]] void fail_unknown_key(const Entry& e, const std::string& dotted, const std::vector<std::string>& siblings,
                                   const ParseContext& ctx);

// Parses the map `n` (null counts as empty) into S; `key` is its dotted name ("" at the root).
template <class S> S parse_struct(const Node& n, const std::string& key, const ParseContext& ctx) {
  const Schema<S>& schema = S::schema();
  const std::string prefix = key.empty() ? "" : key + ".";
  if (!n.is_map() && !n.is_null())
    fail_at(n.source, key.empty() ? "the configuration" : key, ": ", n.describe(),
            " is not valid: expected a map of keys");
  for (const Entry& e : n.entries) {
    bool known = false;
    for (const FieldDef<S>& f : schema.fields) known = known || f.name == e.key;
    if (!known) {
      std::vector<std::string> siblings;
      for (const FieldDef<S>& f : schema.fields) siblings.push_back(f.name);
      fail_unknown_key(e, prefix + e.key, siblings, ctx);
    }
  }
  S s{};
  for (const FieldDef<S>& f : schema.fields) {
    if (const Entry* e = n.find(f.name)) {
      f.parse(s, e->value, prefix + f.name, ctx);
    } else if (f.set_default) {
      f.set_default(s);
    } else if (f.section) {
      f.parse(s, Node::map(n.source), prefix + f.name, ctx);
    } else {
      std::vector<KeyInfo> info;
      f.flatten(prefix, info);
      fail_at(n.source, "missing required key '", prefix + f.name, "' (", info.front().type, ": ", f.doc, ")");
    }
  }
  if (schema.check) schema.check(s, Located(n, prefix));
  return s;
}

template <class S> Node emit_struct(const S& s) {
  Node n = Node::map();
  for (const FieldDef<S>& f : S::schema().fields) n.add(f.name, f.emit(s), {});
  return n;
}

}  // namespace qkv::experiment
