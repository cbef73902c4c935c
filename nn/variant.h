// The attention variants of the study as their names say them: a projection-sharing pattern
// (nn/sharing.h), a head-sharing form and the 2D positional scores of the (+) variants.
//
//   <name> | <alias>       a row of the sharing table, as many KV heads as query heads
//   (<name>)+              with 2D positional scores; where the row ties Q to K (the symmetry
//                          the scores break): (Q=K-V)+, (Q=K=V)+
//   GQA-g, MQA             g KV heads (MQA: one), for rows where Q, K and V have slots of
//                          their own (QKV)
//   Q-GQA-g, Q-MQA         the same for rows where Q has its own slot and K, V share one (Q-K=V)
//   <any of these>+LRr     for rows whose V is K (Q-K=V, Q=K=V and their head-sharing forms): V
//                          = K + (X A) B with A [d, r] and B [r, d_head] per KV head, r in
//                          1..d_head; the cache holds K and the r-dim X A. Between the row itself
//                          (r = 0) and separate K and V (r = d_head): Q-K=V+LR8, Q-MQA+LR4
//   <name>+linear          a row with linear attention (the appendix's, lambda 1) instead of
//                          softmax: Q=K=V+linear; decoding keeps a fixed-size state
//
// parse_variant is the one place a variant name is read; the typed Variant then travels
// through the experiment config into AttentionConfig.
#pragma once
#include <optional>
#include <string>
#include <string_view>

#include "nn/sharing.h"

namespace qkv::nn {

struct Variant {
  Sharing sharing = Sharing::qkv;
  int64_t kv_heads = 0;  // 0: as many as the query heads (MHA); 1: MQA; g: GQA-g
  bool pos2d = false;    // the (+) variants' 2D positional scores
  int64_t v_rank = 0;    // the +LRr form's rank r; 0: none
  bool linear = false;   // the +linear form
  bool operator==(const Variant&) const = default;
};

std::optional<Variant> try_parse_variant(std::string_view name);
Variant parse_variant(std::string_view name);  // ValueError listing the accepted forms
std::string variant_name(const Variant& v);    // canonical: "Q-GQA-4", "(Q=K-V)+"
// Every form the parser accepts, for messages and --help.
std::string accepted_variant_forms();
// Whether the row has head-sharing forms / (+) forms (the rules above).
bool has_head_sharing_forms(Sharing s);
bool has_pos2d_form(Sharing s);

}  // namespace qkv::nn
