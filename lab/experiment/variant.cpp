// Parsing of variant names: the four sharing patterns and their aliases, the (+) forms with 2D
// positional scores, and the head-sharing forms GQA-g, MQA, Q-GQA-g, Q-MQA.
#include "lab/experiment/variant.h"

#include <array>
#include <charconv>

#include "lab/experiment/config_error.h"

namespace qkv::experiment {

namespace {

struct Sharing {
  std::string_view name, alias;
};
constexpr std::array<Sharing, 4> kSharing{{{"QKV", "qkv"}, {"Q=K-V", "qk"}, {"Q-K=V", "kv"}, {"Q=K=V", "k"}}};

// A positive group count without sign or leading zeros beyond normalizing them away.
std::optional<int> parse_groups(std::string_view s) {
  if (s.empty() || s.size() > 6) return std::nullopt;
  for (char c : s)
    if (c < '0' || c > '9') return std::nullopt;
  int g = 0;
  std::from_chars(s.data(), s.data() + s.size(), g);
  if (g < 1) return std::nullopt;
  return g;
}

}  // namespace

std::optional<std::string> canonical_sharing(std::string_view name) {
  for (const Sharing& s : kSharing)
    if (name == s.name || name == s.alias) return std::string(s.name);
  return std::nullopt;
}

std::optional<Variant> try_parse_variant(std::string_view name) {
  if (auto sharing = canonical_sharing(name)) return Variant{*sharing, *sharing, false, 0};
  if (name == "(Q=K-V)+" || name == "(Q=K=V)+")
    return Variant{std::string(name), std::string(name.substr(1, 5)), true, 0};
  if (name == "MQA") return Variant{"MQA", "QKV", false, 1};
  if (name == "Q-MQA") return Variant{"Q-MQA", "Q-K=V", false, 1};
  if (name.starts_with("GQA-"))
    if (auto g = parse_groups(name.substr(4))) return Variant{"GQA-" + std::to_string(*g), "QKV", false, *g};
  if (name.starts_with("Q-GQA-"))
    if (auto g = parse_groups(name.substr(6))) return Variant{"Q-GQA-" + std::to_string(*g), "Q-K=V", false, *g};
  return std::nullopt;
}

std::string accepted_variant_forms() {
  return "QKV (or qkv), Q=K-V (qk), Q-K=V (kv), Q=K=V (k), (Q=K-V)+, (Q=K=V)+, GQA-g, MQA, Q-GQA-g, Q-MQA "
         "(g: the number of KV heads)";
}

Variant parse_variant(std::string_view name) {
  if (auto v = try_parse_variant(name)) return *v;
  throw ConfigError(cat("unknown variant '", name, "'; accepted: ", accepted_variant_forms()));
}

}  // namespace qkv::experiment
