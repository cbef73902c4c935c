// Test cases for the static decode step's ops: cache_attention (new rows at a position held in
// an int64 tensor attending over the cache up to them) against the attention reference on that
// prefix, and kv_write (rows written into the cache at such a position). The positions are
// drawn, so a sample covers a different prefix per run of the harness; the larger sample reaches
// the CUDA split-KV kernel with the position read on the device (splits past the keys in use
// empty). An int8 cache is read with its row scales (the reference widens it first), and
// quantize_int8 is checked against round(x * 127 / max |x|) per row. Keys stored unrotated and
// turned by rotary tables as they are read (a K=V cache under RoPE) are checked against the
// reference on the keys turned first.
#include <doctest/doctest.h>

#include <cmath>

#include "autograd/autograd.h"
#include "tests/ops/references.h"

namespace qkv::test {

OpCase case_attention();  // cases_attention.cpp: its reference, on the prefix

namespace {

// The first n positions (dim 2) of a [B, Hk, C, D] array.
Ref prefix(const Ref& x, int64_t n) {
  Ref out({x.shape[0], x.shape[1], n, x.shape[3]});
  for_each_index(out.shape, [&](const std::vector<int64_t>& i) { out.at(i) = x.at(i); });
  return out;
}

AttentionAttrs scaled(bool causal, int64_t head_dim) { return {causal, 1.0 / std::sqrt(double(head_dim))}; }

// x [B, Hk, C, D] times its row scales [B, Hk, C, 1].
Ref widened(const Ref& x, const Ref& scales) {
  Ref out = x;
  for_each_index(x.shape, [&](const std::vector<int64_t>& i) {
    out.at(i) = x.at(i) * scales.at({i[0], i[1], i[2], 0});
  });
  return out;
}

}  // namespace

namespace {
// Keys [B, Hk, n, D] turned at their positions by cos, sin [P, R/2] (rotate-half pairs).
Ref rotated_keys(const Ref& k, const Ref& cos, const Ref& sin) {
  const int64_t half = cos.shape[1];
  Ref out = k;
  for_each_index(k.shape, [&](const std::vector<int64_t>& i) {
    const int64_t d = i[3];
    if (d >= 2 * half) return;
    const int64_t c = d % half;
    const double co = cos.at({i[2], c}), si = sin.at({i[2], c});
    const double partner = k.at({i[0], i[1], i[2], d < half ? d + half : d - half});
    out.at(i) = d < half ? k.at(i) * co - partner * si : k.at(i) * co + partner * si;
  });
  return out;
}
}  // namespace

OpCase case_cache_attention() {
  OpCase c;
  c.gradcheck = false;
  c.samples = {{"one query at a drawn position of 6",
                {real({1, 2, 1, 3}), real({1, 2, 6, 3}), real({1, 2, 6, 3}), index({}, 6)},
                scaled(true, 3)},
               {"3 queries, grouped heads, causal",
                {real({2, 4, 3, 4}), real({2, 2, 9, 4}), real({2, 2, 9, 2}), index({}, 7)},
                scaled(true, 4)},
               {"not causal",
                {real({1, 2, 2, 3}), real({1, 1, 5, 3}), real({1, 1, 5, 3}), index({}, 4)},
                scaled(false, 3)},
               kernel_path({"split-KV sizes: GQA 4, one query, 200 cached positions, D 64",
                            {real({2, 8, 1, 64}), real({2, 2, 200, 64}), real({2, 2, 200, 64}), index({}, 200)},
                            scaled(true, 64)}),
               {"int8 cache with row scales, grouped heads, 2 queries",
                {real({2, 4, 2, 8}), int8s({2, 2, 7, 8}), int8s({2, 2, 7, 8}), index({}, 6), scales({2, 2, 7, 1}),
                 scales({2, 2, 7, 1})},
                scaled(true, 8)},
               kernel_path({"int8 cache, split-KV sizes: MQA, one query, 150 cached positions, D 64",
                            {real({1, 4, 1, 64}), int8s({1, 1, 150, 64}), int8s({1, 1, 150, 64}), index({}, 150),
                             scales({1, 1, 150, 1}), scales({1, 1, 150, 1})},
                            scaled(true, 64)}),
               {"rotary keys: 6 of 8 dims turned, grouped heads, 2 queries",
                {real({1, 4, 2, 8}), real({1, 2, 9, 8}), real({1, 2, 9, 8}), index({}, 8), absent(), absent(),
                 constant(real({9, 3})), constant(real({9, 3}))},
                scaled(true, 8)},
               {"rotary int8 keys",
                {real({2, 2, 1, 8}), int8s({2, 2, 7, 8}), int8s({2, 2, 7, 8}), index({}, 7), scales({2, 2, 7, 1}),
                 scales({2, 2, 7, 1}), constant(real({7, 4})), constant(real({7, 4}))},
                scaled(true, 8)},
               // One query row per KV head: the CPU decode turns each key in registers as it scores it.
               {"rotary keys, MHA, one query, 40 cached positions, D 64",
                {real({1, 2, 1, 64}), real({1, 2, 40, 64}), real({1, 2, 40, 64}), index({}, 40), absent(), absent(),
                 constant(real({40, 32})), constant(real({40, 32}))},
                scaled(true, 64)},
               kernel_path({"rotary keys, split-KV sizes: GQA 2, one query, 180 cached positions, D 64",
                            {real({1, 4, 1, 64}), real({1, 2, 180, 64}), real({1, 2, 180, 64}), index({}, 180),
                             absent(), absent(), constant(real({180, 32})), constant(real({180, 32}))},
                            scaled(true, 64)}),
               kernel_path({"rotary int8 keys, split-KV sizes: one query, 140 cached positions, D 64",
                            {real({1, 2, 1, 64}), int8s({1, 2, 140, 64}), int8s({1, 2, 140, 64}), index({}, 140),
                             scales({1, 2, 140, 1}), scales({1, 2, 140, 1}), constant(real({140, 32})),
                             constant(real({140, 32}))},
                            scaled(true, 64)})};
  for (Sample& s : c.samples)
    while (s.inputs.size() < 8) s.inputs.push_back(absent());
  c.reference = [](const std::vector<Ref>& in, const Attrs& attrs) {
    const int64_t n = int64_t(in[3].v[0]) + in[0].shape[2];  // the keys in use: up to the last new row
    const bool int8 = in[4].size() > 0;
    Ref k = int8 ? widened(in[1], in[4]) : in[1];
    const Ref v = int8 ? widened(in[2], in[5]) : in[2];
    if (in[6].size() > 0) k = rotated_keys(k, in[6], in[7]);
    return case_attention().reference({in[0], prefix(k, n), prefix(v, n), Ref()}, attrs);
  };
  return c;
}

OpCase case_kv_write() {
  OpCase c;
  c.gradcheck = false;
  c.samples = {{"2 rows at a drawn position",
                {constant(real({2, 3, 5, 4})), constant(real({2, 3, 2, 4})), index({}, 4)}},
               {"one row, 64 wide", {constant(real({1, 2, 9, 64})), constant(real({1, 2, 1, 64})), index({}, 9)}},
               {"int8 rows (a quantized cache)", {int8s({1, 2, 6, 8}), int8s({1, 2, 3, 8}), index({}, 4)}}};
  c.reference = [](const std::vector<Ref>& in, const Attrs&) {
    Ref cache = in[0];
    const auto start = int64_t(in[2].v[0]);
    for_each_index(in[1].shape, [&](const std::vector<int64_t>& i) {
      cache.at({i[0], i[1], start + i[2], i[3]}) = in[1].at(i);
    });
    return std::vector<Ref>{cache};
  };
  return c;
}

OpCase case_quantize_int8() {
  OpCase c;
  c.gradcheck = false;
  c.samples = {{"rows of 8", {real({2, 3, 8})}},
               {"one row of 64", {real({64})}},
               {"a cache's rows", {real({1, 2, 5, 16})}}};
  c.reference = [](const std::vector<Ref>& in, const Attrs&) {
    const Ref& x = in[0];
    const int64_t D = x.shape.back(), rows = x.size() / D;
    Shape scale_shape = x.shape;
    scale_shape.back() = 1;
    Ref q(x.shape), scale(scale_shape);
    for (int64_t r = 0; r < rows; ++r) {
      double amax = 0;
      for (int64_t d = 0; d < D; ++d) amax = std::max(amax, std::abs(x.v[size_t(r * D + d)]));
      scale.v[size_t(r)] = amax / 127;
      for (int64_t d = 0; d < D; ++d) q.v[size_t(r * D + d)] = std::nearbyint(x.v[size_t(r * D + d)] * 127 / amax);
    }
    return std::vector<Ref>{q, scale};
  };
  return c;
}

}  // namespace qkv::test
