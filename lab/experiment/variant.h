// Variant: one attention variant of the study (paper section 1) as a sweep names it — which
// projections are shared, whether the 2D positional scores are added, and how many KV heads.
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace qkv::experiment {

struct Variant {
  std::string name;     // canonical spelling: "QKV", "Q=K-V", "(Q=K-V)+", "GQA-4", "Q-MQA", ...
  std::string sharing;  // "QKV", "Q=K-V", "Q-K=V" or "Q=K=V"
  bool pos2d = false;   // the (+) variants: 2D positional scores
  int kv_groups = 0;    // KV heads; 0 = as many as query heads (MHA)

  bool operator==(const Variant&) const = default;
};

// Parses a variant name, normalizing aliases (qkv, qk, kv, k) and the number in GQA-g. Throws
// ConfigError listing the accepted forms.
Variant parse_variant(std::string_view name);
std::optional<Variant> try_parse_variant(std::string_view name);
// "QKV (qkv), Q=K-V (qk), ..., Q-MQA"
std::string accepted_variant_forms();

// The canonical projection-sharing name for "QKV", "Q=K-V", "Q-K=V", "Q=K=V" or an alias
// (qkv, qk, kv, k); nullopt for anything else.
std::optional<std::string> canonical_sharing(std::string_view name);

}  // namespace qkv::experiment
