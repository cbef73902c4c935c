// The projection-sharing table: one row per pattern of the study (PAPER.md section 1) naming the
// projection slot that serves each attention role. Roles served by one slot are tied: they are
// the same tensor from the projection into the fused attention op and the KV cache.
//
// Everything about a pattern is read from its row: the modules nn::Attention builds (one Linear
// per distinct slot, named after it, in the order the roles first use them), the tied handles
// project() returns, the parameter and MAC closed forms (a slot serving Q is d wide, a K/V-only
// slot kv_heads x d_head), the KV cache layout (one tensor when K and V share a slot), which
// head-sharing and (+) forms exist (nn/variant.h) and the names the CLI accepts.
//
// Adding a pattern is one row plus tests (docs/ADDING_A_VARIANT.md). The static_asserts in
// sharing.cpp refuse a row whose name or alias repeats another's or whose slots are blank.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

// clang-format off
#define QKV_SHARING(X) \
  /*id     name     alias  slot of Q  slot of K  slot of V */ \
  X(qkv,   "QKV",   "qkv", "q",       "k",       "v")         \
  X(qk_v,  "Q=K-V", "qk",  "qk",      "qk",      "v")         \
  X(q_kv,  "Q-K=V", "kv",  "q",       "kv",      "kv")        \
  X(all,   "Q=K=V", "k",   "qkv",     "qkv",     "qkv")       \
  X(qv_k,  "Q=V-K", "qv",  "qv",      "k",       "qv")
// clang-format on

namespace qkv::nn {

enum class Sharing : uint8_t {
#define QKV_SHARING_ID(id, ...) id,
  QKV_SHARING(QKV_SHARING_ID)
#undef QKV_SHARING_ID
};

enum class Role : uint8_t { q, k, v };
inline constexpr std::array<Role, 3> kRoles{Role::q, Role::k, Role::v};
const char* role_name(Role r);  // "Q", "K", "V"

struct SharingPattern {
  Sharing id;
  std::string_view name;                 // as the paper writes it: "Q-K=V"
  std::string_view alias;                // the official code's: "kv"
  std::array<std::string_view, 3> slot;  // the slot serving Q, K, V (its module name)

  // Distinct slots in the order the roles first use them; slot_index(r) indexes it.
  constexpr int slot_count() const { return 1 + (slot[1] != slot[0]) + (slot[2] != slot[0] && slot[2] != slot[1]); }
  constexpr int slot_index(Role r) const {
    const auto i = size_t(r);
    if (slot[i] == slot[0]) return 0;
    if (slot[i] == slot[1]) return 1;
    return slot[1] == slot[0] ? 1 : 2;
  }
  constexpr std::string_view slot_name(int index) const {
    for (Role r : kRoles)
      if (slot_index(r) == index) return slot[size_t(r)];
    return {};
  }
  constexpr bool ties(Role a, Role b) const { return slot[size_t(a)] == slot[size_t(b)]; }
  // Whether slot `index` serves the query role (then it has all the query heads).
  constexpr bool serves_query(int index) const { return slot_index(Role::q) == index; }
  // Tensors a KV cache stores per layer: one when K and V share a slot.
  constexpr int cache_tensors() const { return ties(Role::k, Role::v) ? 1 : 2; }
  // Whether the row has the low-rank V-residual form (nn/variant.h "+LRr"): V = K + (X A) B,
  // rank r per KV head, for rows whose V is K. The cache then holds K and the r-dim X A.
  constexpr bool has_v_residual() const { return ties(Role::k, Role::v); }
  // Output width of the variant's own projections (W_o excluded), for model width d and
  // key/value width d_kv = kv_heads x d_head.
  constexpr int64_t projection_width(int64_t d, int64_t d_kv) const {
    int64_t w = 0;
    for (int i = 0; i < slot_count(); ++i) w += serves_query(i) ? d : d_kv;
    return w;
  }
};

std::span<const SharingPattern> sharing_table();
const SharingPattern& sharing_pattern(Sharing s);
const char* sharing_name(Sharing s);
// By name or alias; nullopt for anything else.
std::optional<Sharing> find_sharing(std::string_view name);
// The same, or ValueError listing every name and alias.
Sharing parse_sharing(std::string_view name);
// "QKV (qkv), Q=K-V (qk), ..."
std::string sharing_names();

}  // namespace qkv::nn
