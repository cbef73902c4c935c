// The scalar codecs (integer, number, bool, string) and the common rules.
#include "lab/experiment/codec.h"

#include <charconv>
#include <cmath>
#include <set>

namespace qkv::experiment {

namespace {

// A plain (unquoted) scalar: quoted text is a string in YAML, never a number or a bool.
bool plain_scalar(const Node& n) { return n.is_scalar() && !n.quoted && !n.text.empty(); }

}  // namespace

bool Codec<int>::parse(const Node& n, int& out, const std::string&) {
  if (!plain_scalar(n)) return false;
  std::string_view s = n.text;
  if (s.front() == '+') s.remove_prefix(1);
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}

Node Codec<int>::emit(int v) { return Node::scalar(std::to_string(v)); }

bool Codec<double>::parse(const Node& n, double& out, const std::string&) {
  if (!plain_scalar(n)) return false;
  std::string_view s = n.text;
  if (s.front() == '+') s.remove_prefix(1);
  double v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v)) return false;
  out = v;
  return true;
}

Node Codec<double>::emit(double v) { return Node::scalar(format_number(v)); }

bool Codec<bool>::parse(const Node& n, bool& out, const std::string&) {
  if (!plain_scalar(n)) return false;
  if (n.text == "true" || n.text == "True") return out = true, true;
  if (n.text == "false" || n.text == "False") return out = false, true;
  return false;
}

Node Codec<bool>::emit(bool v) { return Node::scalar(v ? "true" : "false"); }

bool Codec<std::string>::parse(const Node& n, std::string& out, const std::string&) {
  if (!n.is_scalar()) return false;
  out = n.text;
  return true;
}

Node Codec<std::string>::emit(const std::string& v) { return Node::scalar(v); }

bool Codec<Device>::parse(const Node& n, Device& out, const std::string&) {
  if (!n.is_scalar()) return false;
  try {
    out = Device(n.text);
  } catch (const DeviceError&) {
    return false;  // the caller's message names the key and the spellings (type())
  }
  return true;
}

Node Codec<Device>::emit(const Device& v) { return Node::scalar(v.str()); }

std::string format_number(double v) {
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, ec == std::errc() ? end : buf);
  // Keep a visible decimal point on whole numbers so the YAML reads as a real number.
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

Rule<int> at_least(int lo) {
  return {cat(">= ", lo), [lo](int& v) { return v >= lo; }};
}

Rule<int> in_range(int lo, int hi) {
  return {cat("in ", lo, "..", hi), [lo, hi](int& v) { return v >= lo && v <= hi; }};
}

Rule<double> at_least(double lo) {
  return {cat(">= ", format_number(lo)), [lo](double& v) { return v >= lo; }};
}

Rule<double> greater_than(double lo) {
  return {cat("> ", format_number(lo)), [lo](double& v) { return v > lo; }};
}

Rule<double> in_half_open(double lo, double hi) {
  return {cat("in [", format_number(lo), ", ", format_number(hi), ")"),
          [lo, hi](double& v) { return v >= lo && v < hi; }};
}

Rule<std::string> one_of(std::vector<std::string> names) {
  std::string text = "(one of: ";
  for (size_t i = 0; i < names.size(); ++i) {
    if (i) text += ", ";
    text += names[i];
  }
  text += ")";
  return {text, [names](std::string& v) {
            for (const std::string& n : names)
              if (n == v) return true;
            return false;
          }};
}

Rule<std::vector<int>> int_list(int min_item, bool non_empty, bool unique) {
  std::string text = cat(">= ", min_item);
  if (non_empty) text = "(non-empty), items " + text;
  if (unique) text += ", no repeats";
  return {text, [=](std::vector<int>& v) {
            if (non_empty && v.empty()) return false;
            for (int x : v)
              if (x < min_item) return false;
            return !unique || std::set<int>(v.begin(), v.end()).size() == v.size();
          }};
}

}  // namespace qkv::experiment
