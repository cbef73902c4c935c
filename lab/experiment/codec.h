// Value codecs and rules: how one configuration value of a C++ type is read from a Node and
// written back (Codec<T>), and what else it must satisfy (Rule<T>: a range, a set, a format).
// The schema (schema.h) combines the two into a field; messages name both ("integer >= 2").
#pragma once
#include <array>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "lab/experiment/node.h"
#include "tensor/device.h"

namespace qkv::experiment {

// A constraint beyond the type. `text` completes the type name in messages and in
// describe_schema() (">= 2" -> "integer >= 2"); `accept` may normalize the value (an alias to its
// canonical spelling) and returns false to reject it. An empty rule accepts everything.
template <class T> struct Rule {
  std::string text;
  std::function<bool(T&)> accept;
};

// Codec<T>: static std::string type(); static bool parse(const Node&, T&, const std::string& key)
// (false: not a T; or throws ConfigError with a more precise message naming `key`, the dotted
// key being read); static Node emit(const T&).
template <class T> struct Codec;

template <> struct Codec<int> {
  static std::string type() { return "integer"; }
  static bool parse(const Node& n, int& out, const std::string& key);
  static Node emit(int v);
};

template <> struct Codec<double> {
  static std::string type() { return "number"; }
  static bool parse(const Node& n, double& out, const std::string& key);
  static Node emit(double v);
};

template <> struct Codec<bool> {
  static std::string type() { return "true|false"; }
  static bool parse(const Node& n, bool& out, const std::string& key);
  static Node emit(bool v);
};

template <> struct Codec<std::string> {
  static std::string type() { return "string"; }
  static bool parse(const Node& n, std::string& out, const std::string& key);
  static Node emit(const std::string& v);
};

// A device, spelled as tensor/device.h reads it (the one parser of device names).
template <> struct Codec<Device> {
  static std::string type() { return "device (cpu, cuda or cuda:N)"; }
  static bool parse(const Node& n, Device& out, const std::string& key);
  static Node emit(const Device& v);
};

// Enums: specialize EnumNames<E> with `static constexpr std::array<std::pair<std::string_view, E>,
// N> values`, the spellings in declaration order.
template <class E> struct EnumNames;

template <class E> std::string_view enum_name(E v) {
  for (const auto& [name, value] : EnumNames<E>::values)
    if (value == v) return name;
  return "?";
}

template <class E> std::optional<E> enum_from_name(std::string_view name) {
  for (const auto& [n, value] : EnumNames<E>::values)
    if (n == name) return value;
  return std::nullopt;
}

template <class E>
requires std::is_enum_v<E>
struct Codec<E> {
  static std::string type() {
    std::string s = "one of ";
    for (size_t i = 0; i < EnumNames<E>::values.size(); ++i) {
      if (i) s += "|";
      s += std::string(EnumNames<E>::values[i].first);
    }
    return s;
  }
  static bool parse(const Node& n, E& out, const std::string&) {
    if (!n.is_scalar()) return false;
    auto v = enum_from_name<E>(n.text);
    if (v) out = *v;
    return v.has_value();
  }
  static Node emit(E v) { return Node::scalar(std::string(enum_name(v))); }
};

template <class T> struct Codec<std::vector<T>> {
  static std::string type() { return "list of " + Codec<T>::type(); }
  // A bad item is reported at its own position, as key[i].
  static bool parse(const Node& n, std::vector<T>& out, const std::string& key) {
    if (!n.is_sequence()) return false;
    std::vector<T> values(n.items.size());
    for (size_t i = 0; i < n.items.size(); ++i) {
      const Node& item = n.items[i];
      const std::string item_key = cat(key, "[", i, "]");
      if (!Codec<T>::parse(item, values[i], item_key))
        fail_at(item.source, item_key, ": ", item.describe(), " is not valid: expected ", Codec<T>::type());
    }
    out = std::move(values);
    return true;
  }
  static Node emit(const std::vector<T>& v) {
    Node n = Node::sequence({});
    for (const T& x : v) n.items.push_back(Codec<T>::emit(x));
    return n;
  }
};

// "integer >= 2": the type followed by the rule's text.
template <class T> std::string expected_form(const Rule<T>& rule) {
  return rule.text.empty() ? Codec<T>::type() : Codec<T>::type() + " " + rule.text;
}

// Reads `n` into `out` or throws ConfigError "<source>: <key>: <value> is not valid: expected
// <form>". `out` is untouched on failure.
template <class T> void parse_value(const Node& n, T& out, const Rule<T>& rule, const std::string& key) {
  T v{};
  if (Codec<T>::parse(n, v, key) && (!rule.accept || rule.accept(v))) {
    out = std::move(v);
    return;
  }
  std::string hint;
  if (n.is_sequence() && !Codec<T>::type().starts_with("list"))
    hint = " (to sweep a key over several values, list them under sweep.grid)";
  fail_at(n.source, key, ": ", n.describe(), " is not valid: expected ", expected_form(rule), hint);
}

// Common rules.
Rule<int> at_least(int lo);        // ">= lo"
Rule<double> at_least(double lo);  // ">= lo"
// Sizes get an upper bound too, so a typo (d_model=1000000) is an error naming the key, not an
// allocation of terabytes.
Rule<int> in_range(int lo, int hi);                        // "in lo..hi"
Rule<double> greater_than(double lo);                      // "> lo"
Rule<double> in_half_open(double lo, double hi);           // "in [lo, hi)"
Rule<std::string> one_of(std::vector<std::string> names);  // "(one of: a, b)"
// A list whose items satisfy `item`, optionally non-empty and without repeated values.
Rule<std::vector<int>> int_list(int min_item, bool non_empty, bool unique);

// Shortest text that reads back as the same double ("0.001", "1e-08").
std::string format_number(double v);

}  // namespace qkv::experiment
