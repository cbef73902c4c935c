// The GPT-2 124M shapes the GPT benchmarks share (bench_gpt, bench_decode): 12 layers, d_model
// 768, 12 heads, dropout 0, with a variant's projection and head sharing.
#pragma once
#include "nn/models/gpt.h"
#include "nn/variant.h"

namespace qkv::bench {

// ValueError for the (+) variants, whose 2D positional scores are for non-causal tasks.
inline void check_gpt_variant(const nn::Variant& v) {
  check<ValueError>(!v.pos2d, nn::variant_name(v), " adds 2D positional scores, which are for non-causal tasks");
}

inline nn::GPTConfig gpt2_124m_config(const nn::Variant& v, int64_t vocab, int64_t context) {
  check_gpt_variant(v);
  nn::GPTConfig c;
  c.vocab = vocab;
  c.context = context;
  c.layers = 12;
  c.dropout = 0.0;
  c.attention.d_model = 768;
  c.attention.heads = 12;
  c.attention.kv_heads = v.kv_heads;
  c.attention.sharing = v.sharing;
  c.attention.v_rank = v.v_rank;
  c.attention.linear = v.linear;
  return c;
}

// Whether bench/torch_models.py's GPT has the variant: it has no +LRr or +linear form.
inline bool torch_has_variant(const nn::Variant& v) { return v.v_rank == 0 && !v.linear; }

}  // namespace qkv::bench
