#include "nn/sharing.h"

#include "tensor/error.h"

namespace qkv::nn {
namespace {

constexpr SharingPattern kTable[] = {
#define QKV_SHARING_ROW(id, name, alias, q, k, v) SharingPattern{Sharing::id, name, alias, {q, k, v}},
    QKV_SHARING(QKV_SHARING_ROW)
#undef QKV_SHARING_ROW
};

constexpr bool rows_in_id_order() {
  for (size_t i = 0; i < std::size(kTable); ++i)
    if (size_t(kTable[i].id) != i) return false;
  return true;
}
// Names and aliases are the spellings users type: each must mean one pattern.
constexpr bool spellings_unique() {
  for (const SharingPattern& a : kTable)
    for (const SharingPattern& b : kTable) {
      if (&a == &b) continue;
      if (a.name == b.name || a.alias == b.alias || a.name == b.alias) return false;
    }
  return true;
}
constexpr bool rows_well_formed() {
  for (const SharingPattern& r : kTable) {
    if (r.name.empty() || r.alias.empty()) return false;
    for (std::string_view s : r.slot)
      if (s.empty() || s == "o" || s.find('.') != std::string_view::npos) return false;  // "o" is W_o
  }
  return true;
}
static_assert(rows_in_id_order(), "kTable must be indexable by Sharing");
static_assert(spellings_unique(), "every sharing name and alias must be unique");
static_assert(rows_well_formed(), "every row needs a name, an alias and three slot names (not 'o', no dots)");

}  // namespace

const char* role_name(Role r) {
  switch (r) {
    case Role::q: return "Q";
    case Role::k: return "K";
    case Role::v: return "V";
  }
  return "?";
}

std::span<const SharingPattern> sharing_table() { return kTable; }
const SharingPattern& sharing_pattern(Sharing s) { return kTable[size_t(s)]; }
const char* sharing_name(Sharing s) { return kTable[size_t(s)].name.data(); }

std::optional<Sharing> find_sharing(std::string_view name) {
  for (const SharingPattern& r : kTable)
    if (name == r.name || name == r.alias) return r.id;
  return std::nullopt;
}

std::string sharing_names() {
  std::string s;
  for (const SharingPattern& r : kTable) s += cat(s.empty() ? "" : ", ", r.name, " (", r.alias, ")");
  return s;
}

Sharing parse_sharing(std::string_view name) {
  if (auto s = find_sharing(name)) return *s;
  throw ValueError(cat("unknown projection sharing '", name, "': expected one of ", sharing_names()));
}

}  // namespace qkv::nn
