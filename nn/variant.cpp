#include "nn/variant.h"

#include <charconv>

#include "tensor/error.h"

namespace qkv::nn {
namespace {

// A positive decimal group count of at most six digits.
std::optional<int64_t> parse_groups(std::string_view s) {
  if (s.empty() || s.size() > 6) return std::nullopt;
  for (char c : s)
    if (c < '0' || c > '9') return std::nullopt;
  int64_t g = 0;
  std::from_chars(s.data(), s.data() + s.size(), g);
  if (g < 1) return std::nullopt;
  return g;
}

// "" for rows whose K and V have slots of their own, "Q-" where K and V share one.
std::string head_prefix(Sharing s) { return sharing_pattern(s).ties(Role::k, Role::v) ? "Q-" : ""; }

}  // namespace

bool has_head_sharing_forms(Sharing s) {
  const SharingPattern& p = sharing_pattern(s);
  return !p.ties(Role::q, Role::k) && !p.ties(Role::q, Role::v);
}

bool has_pos2d_form(Sharing s) { return sharing_pattern(s).ties(Role::q, Role::k); }

namespace {
std::optional<Variant> parse_without_residual(std::string_view name) {
  if (auto s = find_sharing(name)) return Variant{*s, 0, false};
  if (name.size() > 3 && name.front() == '(' && name.ends_with(")+")) {
    const std::string_view inner = name.substr(1, name.size() - 3);
    for (const SharingPattern& p : sharing_table())
      if (inner == p.name && has_pos2d_form(p.id)) return Variant{p.id, 0, true};
  }
  for (const SharingPattern& p : sharing_table()) {
    if (!has_head_sharing_forms(p.id)) continue;
    const std::string prefix = head_prefix(p.id);
    if (!name.starts_with(prefix)) continue;
    const std::string_view rest = name.substr(prefix.size());
    if (rest == "MQA") return Variant{p.id, 1, false};
    if (rest.starts_with("GQA-"))
      if (auto g = parse_groups(rest.substr(4))) return Variant{p.id, *g, false};
  }
  return std::nullopt;
}
}  // namespace

std::optional<Variant> try_parse_variant(std::string_view name) {
  if (name.ends_with("+linear")) {
    auto v = find_sharing(name.substr(0, name.size() - 7));
    if (!v) return std::nullopt;
    return Variant{*v, 0, false, 0, true};
  }
  const size_t lr = name.rfind("+LR");
  if (lr == std::string_view::npos) return parse_without_residual(name);
  auto v = parse_without_residual(name.substr(0, lr));
  const auto rank = parse_groups(name.substr(lr + 3));
  if (!v || !rank || v->pos2d || !sharing_pattern(v->sharing).has_v_residual()) return std::nullopt;
  v->v_rank = *rank;
  return v;
}

Variant parse_variant(std::string_view name) {
  if (auto v = try_parse_variant(name)) return *v;
  throw ValueError(cat("unknown variant '", name, "'; accepted: ", accepted_variant_forms()));
}

std::string variant_name(const Variant& v) {
  const std::string sharing = sharing_name(v.sharing);
  const std::string residual = v.v_rank > 0 ? "+LR" + std::to_string(v.v_rank) : "";
  if (v.linear) return sharing + "+linear";
  if (v.pos2d) return "(" + sharing + ")+";
  if (v.kv_heads == 1) return head_prefix(v.sharing) + "MQA" + residual;
  if (v.kv_heads > 1) return head_prefix(v.sharing) + "GQA-" + std::to_string(v.kv_heads) + residual;
  return sharing + residual;
}

std::string accepted_variant_forms() {
  std::string plain, plus, heads, residual;
  for (const SharingPattern& p : sharing_table()) {
    plain += cat(plain.empty() ? "" : ", ", p.name, " (or ", p.alias, ")");
    if (has_pos2d_form(p.id)) plus += cat(", (", p.name, ")+");
    if (has_head_sharing_forms(p.id)) heads += cat(", ", head_prefix(p.id), "GQA-g, ", head_prefix(p.id), "MQA");
    if (p.has_v_residual()) residual += cat(residual.empty() ? "" : ", ", p.name);
  }
  return plain + plus + heads + " (g: the number of KV heads); +LRr after " + residual +
         " and their GQA/MQA forms (V = K + a rank-r residual per KV head, r <= d_head); +linear after a name "
         "(linear attention, e.g. Q=K=V+linear)";
}

}  // namespace qkv::nn
