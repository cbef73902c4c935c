// The low-rank V residual (+LRr, nn/attention.h): V = K + (X A) B per KV head. As properties:
// B = 0 is the row itself, r = d_head reaches separate K and V (QKV) exactly, the cached path
// over rows [K | X A] equals the materialized V, and the names and the rank are checked.
#include <doctest/doctest.h>

#include "autograd/autograd.h"
#include "nn/attention.h"
#include "nn/kv_cache.h"
#include "nn/variant.h"

using namespace qkv;
using namespace qkv::nn;

namespace {

AttentionConfig config(Sharing s, int64_t v_rank, int64_t kv_heads = 0, bool causal = false) {
  AttentionConfig c;
  c.d_model = 16;
  c.heads = 4;
  c.kv_heads = kv_heads;
  c.sharing = s;
  c.v_rank = v_rank;
  c.causal = causal;
  return c;
}

double max_abs_diff(const Tensor& a, const Tensor& b) { return amax(abs(a - b)).item<float>(); }

// Copies every parameter `from` and `to` both have (by name).
void copy_shared_parameters(const Module& from, Module& to) {
  NoGradGuard ng;
  auto source = from.named_parameters();
  for (auto& [name, t] : to.named_parameters())
    for (auto& [other, s] : source)
      if (other == name) t.copy_(s);
}

}  // namespace

TEST_CASE("low-rank V: with B = 0 the variant computes its row exactly (Q-K=V, Q-GQA-2, Q=K=V)") {
  const Tensor x = randn({2, 6, 16});
  for (auto [s, kv_heads] : {std::pair{Sharing::q_kv, 0}, {Sharing::q_kv, 2}, {Sharing::all, 0}}) {
    CAPTURE(sharing_name(s));
    Attention lr(config(s, 3, kv_heads)), plain(config(s, 0, kv_heads));
    copy_shared_parameters(lr, plain);
    {
      NoGradGuard ng;
      lr.v_up.fill_(0.0);
    }
    CHECK(max_abs_diff(lr.forward(x), plain.forward(x)) == 0);
    // Parameters: A [Hk r, d] with its bias and B [Hk, r, dh] on top of the row's.
    const int64_t hk = kv_heads == 0 ? 4 : kv_heads;
    CHECK(lr.num_parameters() - plain.num_parameters() == hk * 3 * (16 + 1) + hk * 3 * 4);
  }
}

TEST_CASE("low-rank V: at rank d_head the residual reaches QKV's separate W_v exactly") {
  // V_h = X W_k,h^T + b_k,h + (X A_h^T + a_h) B_h with B_h = I and A_h = W_v,h - W_k,h,
  // a_h = b_v,h - b_k,h is X W_v,h^T + b_v,h: the same attention as QKV's, input gradients too.
  for (int64_t kv_heads : {0, 2}) {
    CAPTURE(kv_heads);
    Attention qkv(config(Sharing::qkv, 0, kv_heads)), lr(config(Sharing::q_kv, 4, kv_heads));
    {
      NoGradGuard ng;
      lr.projection(Role::q).weight.copy_(qkv.projection(Role::q).weight);
      lr.projection(Role::q).bias.copy_(qkv.projection(Role::q).bias);
      lr.projection(Role::k).weight.copy_(qkv.projection(Role::k).weight);
      lr.projection(Role::k).bias.copy_(qkv.projection(Role::k).bias);
      lr.v_down->weight.copy_(qkv.projection(Role::v).weight - qkv.projection(Role::k).weight);
      lr.v_down->bias.copy_(qkv.projection(Role::v).bias - qkv.projection(Role::k).bias);
      const int64_t hk = lr.v_up.size(0);
      std::vector<float> identity(size_t(hk * 16), 0.0f);
      for (int64_t h = 0; h < hk; ++h)
        for (int64_t i = 0; i < 4; ++i) identity[size_t(h * 16 + i * 5)] = 1.0f;
      lr.v_up.copy_(from_vector(identity, {hk, 4, 4}));
      lr.o.weight.copy_(qkv.o.weight);
      lr.o.bias.copy_(qkv.o.bias);
    }
    const Tensor x = randn({2, 5, 16});
    Tensor a = x.detach().set_requires_grad(), b = x.detach().set_requires_grad();
    const Tensor ya = lr.forward(a), yb = qkv.forward(b);
    CHECK(max_abs_diff(ya, yb) < 1e-5);
    sum(ya * ya).backward();
    sum(yb * yb).backward();
    CHECK(max_abs_diff(a.grad(), b.grad()) < 1e-4);
  }
}

TEST_CASE("low-rank V: attention over cached rows [K | X A] equals the materialized V, in every cache dtype") {
  for (int64_t kv_heads : {0, 1}) {
    CAPTURE(kv_heads);
    Attention a(config(Sharing::q_kv, 2, kv_heads, /*causal=*/true));
    a.eval();
    NoGradGuard ng;
    const Tensor x = randn({2, 9, 16});
    const Tensor full = a.forward(x);
    for (DType dt : {DType::f32, DType::bf16, DType::i8}) {
      CAPTURE(std::string(dtype_name(dt)));
      KVCache cache(a.config(), 1, 2, 12, dt);
      CHECK(cache.bytes() == KVCache::bytes_per_token(a.config(), 1, dt) * 2 * 12);
      Tensor y = a.forward_cached(x.narrow(1, 0, 5), cache, 0);
      cache.advance(5);
      for (int64_t t = 5; t < 9; ++t) {
        y = concat({y, a.forward_cached(x.narrow(1, t, 1), cache, 0)}, 1);
        cache.advance(1);
      }
      const double tolerance = dt == DType::f32 ? 1e-5 : 2e-2;
      CHECK(max_abs_diff(y, full) < tolerance);
    }
  }
  // The cache's row: d_head + r per KV head, once (K=V).
  AttentionConfig c = config(Sharing::q_kv, 2, 0, true);
  CHECK(KVCache::bytes_per_token(c, 3, DType::f32) == 4 * (4 + 2) * 4 * 3);
}

TEST_CASE("low-rank V: names, and a rank or row that cannot have it is refused") {
  CHECK(parse_variant("Q-K=V+LR8") == Variant{Sharing::q_kv, 0, false, 8});
  CHECK(parse_variant("kv+LR8") == Variant{Sharing::q_kv, 0, false, 8});
  CHECK(parse_variant("Q-MQA+LR4") == Variant{Sharing::q_kv, 1, false, 4});
  CHECK(parse_variant("Q-GQA-2+LR16") == Variant{Sharing::q_kv, 2, false, 16});
  CHECK(parse_variant("Q=K=V+LR2") == Variant{Sharing::all, 0, false, 2});
  for (const char* name : {"Q-K=V+LR8", "Q-MQA+LR4", "Q-GQA-2+LR16", "Q=K=V+LR2"})
    CHECK(variant_name(parse_variant(name)) == name);
  for (const char* bad : {"QKV+LR4", "GQA-2+LR4", "Q=K-V+LR2", "Q-K=V+LR0", "Q-K=V+LR", "(Q=K=V)+LR2", "Q-K=V+LRx"}) {
    CAPTURE(bad);
    CHECK_FALSE(try_parse_variant(bad).has_value());
  }
  CHECK(accepted_variant_forms().find("+LRr") != std::string::npos);
  CHECK_THROWS_WITH_AS(Attention(config(Sharing::q_kv, 5)), doctest::Contains("at most the head dim 4"), ValueError);
  CHECK_THROWS_WITH_AS(Attention(config(Sharing::qkv, 2)), doctest::Contains("needs a row whose V is K"), ValueError);
}
