// The GPT in its Llama form (nn::llama_block): RMS norms, rotary positions, a SwiGLU MLP, no
// biases, untied or tied head, a head dim of its own; every sharing variant. Decoding over the
// KV cache equals the full forward pass (float32, bf16 and int8 caches, the eager and the static
// step), a K=V variant's cache holds one unrotated tensor (half of QKV's bytes) whose keys are
// turned as read, and rotary positions make the scores depend on offsets alone.
#include <doctest/doctest.h>

#include <cmath>

#include "autograd/autograd.h"
#include "nn/models/gpt.h"
#include "nn/variant.h"
#include "tests/support/tensor_compare.h"

using namespace qkv;
using namespace qkv::nn;

namespace {

struct LlamaVariant {
  std::string name;
  Sharing sharing;
  int64_t kv_heads;  // 0: MHA
  int64_t v_rank = 0;
};
// Every row of the sharing table with its GQA-2 and MQA forms where it has them, and a low-rank
// V residual on the rows whose V is K.
const std::vector<LlamaVariant> kVariants = [] {
  std::vector<LlamaVariant> out;
  for (const SharingPattern& p : sharing_table())
    for (int64_t kv_heads : {0, 2, 1})
      if (kv_heads == 0 || has_head_sharing_forms(p.id)) {
        out.push_back({variant_name({p.id, kv_heads, false}), p.id, kv_heads});
        if (p.has_v_residual() && kv_heads == 0) out.push_back({variant_name({p.id, 0, false, 3}), p.id, 0, 3});
      }
  return out;
}();

// d_model 24 with 4 heads of 8 (not 24 / 4): the head dim is the model's own; llama3 scaling of
// a short original context, so that every band of frequencies is exercised.
GPTConfig tiny(const LlamaVariant& v, bool tied = false) {
  GPTConfig c;
  c.vocab = 61;
  c.context = 24;
  c.layers = 2;
  c.dropout = 0.0;
  c.ffn = 40;
  c.attention.d_model = 24;
  c.attention.heads = 4;
  c.attention.head_size = 8;
  c.attention.kv_heads = v.kv_heads;
  c.attention.sharing = v.sharing;
  c.attention.v_rank = v.v_rank;
  RopeConfig rope;
  rope.theta = 500;
  rope.scaling = RopeScaling::llama3;
  rope.factor = 4;
  rope.original_context = 16;
  c = llama_block(c, rope);
  c.tied_head = tied;
  return c;
}

Tensor random_ids(int64_t B, int64_t T, int64_t vocab, uint64_t seed) {
  Generator g(seed);
  Tensor u = uniform({B * T}, 0.0, double(vocab), {}, &g);
  std::vector<int64_t> ids(size_t(B * T));
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = std::min<int64_t>(vocab - 1, int64_t(u.data<float>()[i]));
  return from_vector(ids, {B, T});
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  return test::max_abs_difference(a.to(DType::f32), b.to(DType::f32));
}

}  // namespace

TEST_CASE("llama: the closed-form parameter count equals the model's, tied or not, with and without biases") {
  for (const auto& v : kVariants)
    for (bool tied : {false, true})
      for (bool biases : {false, true}) {
        CAPTURE(v.name);
        CAPTURE(tied);
        CAPTURE(biases);
        GPTConfig c = tiny(v, tied);
        c.attention.bias = c.mlp_bias = biases;
        Generator g(1);
        GPT model(c, &g);
        CHECK(model.num_parameters() == gpt_parameter_count(c));
        CHECK(!model.wpe);  // positions are rotary
        CHECK(bool(model.lm_head) == !tied);
      }
}

TEST_CASE("llama: prefill plus one-token decoding over the KV cache equals the full forward pass") {
  for (const auto& v : kVariants) {
    CAPTURE(v.name);
    Generator g(5);
    GPT model(tiny(v), &g);
    model.eval();
    NoGradGuard no_grad;
    const int64_t B = 2, T = 20, prompt = 7;
    const Tensor ids = random_ids(B, T, 61, 6);
    const Tensor full = model.forward(ids);
    KVCache cache = model.make_cache(B);
    CHECK(max_abs_diff(model.forward_cached(ids.narrow(1, 0, prompt), cache), full.narrow(1, 0, prompt)) < 1e-5);
    for (int64_t t = prompt; t < T; ++t)
      CHECK(max_abs_diff(model.forward_cached(ids.narrow(1, t, 1), cache), full.narrow(1, t, 1)) < 1e-5);
  }
}

TEST_CASE("llama: decode_step with device-side positions gives forward_cached's logits, every cache dtype") {
  for (DType dt : {DType::f32, DType::bf16, DType::i8})
    for (const auto& v : kVariants) {
      CAPTURE(v.name);
      CAPTURE(std::string(dtype_name(dt)));
      Generator g(5);
      GPT model(tiny(v), &g);
      model.eval();
      NoGradGuard no_grad;
      const int64_t B = 2, T = 12, prompt = 5;
      const Tensor ids = random_ids(B, T, 61, 6);
      KVCache eager = model.make_cache(B, 0, dt), fixed = model.make_cache(B, 0, dt);
      Tensor want = model.forward_cached(ids.narrow(1, 0, prompt), eager);
      CHECK(max_abs_diff(model.decode_step(ids.narrow(1, 0, prompt), arange(prompt, DType::i64), fixed), want) == 0);
      Tensor position = zeros({1}, DType::i64);
      for (int64_t t = prompt; t < T; ++t) {
        position.fill_(double(t));
        want = model.forward_cached(ids.narrow(1, t, 1), eager);
        REQUIRE(max_abs_diff(model.decode_step(ids.narrow(1, t, 1), position, fixed), want) == 0);
      }
    }
}

TEST_CASE("llama: bf16 and int8 caches decode close to the float32 forward pass") {
  for (const auto& v : kVariants) {
    CAPTURE(v.name);
    Generator g(7);
    GPT model(tiny(v), &g);
    model.eval();
    NoGradGuard no_grad;
    const int64_t T = 12, prompt = 6;
    const Tensor ids = random_ids(2, T, 61, 8);
    const Tensor full = model.forward(ids);
    for (DType dt : {DType::bf16, DType::i8}) {
      CAPTURE(std::string(dtype_name(dt)));
      KVCache cache = model.make_cache(2, 0, dt);
      double worst = max_abs_diff(model.forward_cached(ids.narrow(1, 0, prompt), cache), full.narrow(1, 0, prompt));
      for (int64_t t = prompt; t < T; ++t)
        worst = std::max(worst, max_abs_diff(model.forward_cached(ids.narrow(1, t, 1), cache), full.narrow(1, t, 1)));
      CHECK(worst > 0);
      CHECK(worst < 2e-2);
    }
  }
}

// K=V under RoPE: one tensor of s per layer (half of QKV's bytes), holding the value rows
// unrotated; the keys attention reads are those rows turned at their positions.
TEST_CASE("llama: a K=V cache stores s once, unrotated, half of QKV's bytes") {
  const LlamaVariant qkv{"QKV", Sharing::qkv, 0}, kv{"Q-K=V", Sharing::q_kv, 0};
  CHECK(KVCache::bytes_per_token(tiny(kv).attention, 2, DType::f32) * 2 ==
        KVCache::bytes_per_token(tiny(qkv).attention, 2, DType::f32));
  Generator g(3);
  GPT model(tiny(kv), &g);
  model.eval();
  NoGradGuard no_grad;
  const Tensor ids = random_ids(1, 6, 61, 4);
  KVCache cache = model.make_cache(1, 8);
  CHECK(!cache.stores_values());
  CHECK(model.blocks[0]->attn.keys_turned_on_read());
  model.forward_cached(ids, cache);
  // Layer 0's cached rows are s = ln1(x) W_kv split into heads, the value's rows, not RoPE(s).
  const Tensor x0 = model.blocks[0]->ln1.forward(model.embed(ids, 0));
  const Tensor s = model.blocks[0]->attn.projection(Role::k).forward(x0).reshape({1, 6, 4, 8}).permute({0, 2, 1, 3});
  const Tensor stored =
      cache.write_at(0, zeros({1, 4, 1, 8}), Tensor(), full({1}, 7.0, TensorOptions(DType::i64, kCPU))).keys;
  CHECK(max_abs_diff(stored.narrow(2, 0, 6), s) < 1e-6);
  const Attention::Heads h = model.blocks[0]->attn.project(x0);
  CHECK(max_abs_diff(h.v, s) < 1e-6);                                  // the value is s
  CHECK(max_abs_diff(h.k, s) > 1e-3);                                  // the key is s turned
  CHECK(max_abs_diff(h.k.narrow(2, 0, 1), s.narrow(2, 0, 1)) < 1e-6);  // position 0 turns by 0
}

// Rotary positions: the score of query i and key j depends on j - i alone, so the same tokens
// shifted along the sequence give the same scores (the model has no other positions).
TEST_CASE("llama: rotary scores depend on the offset between query and key only") {
  Generator g(9);
  GPTConfig c = tiny({"Q=K=V", Sharing::all, 0});
  Attention attn(c.attention, &g);
  NoGradGuard no_grad;
  const Tensor x = normal({1, 6, 24}, 0, 1, {}, &g);
  const Tensor padded = concat({normal({1, 5, 24}, 0, 1, {}, &g), x}, 1);
  const Tensor s0 = attn.scores(x), s5 = attn.scores(padded).narrow(2, 5, 6).narrow(3, 5, 6);
  CHECK(max_abs_diff(s0, s5) < 1e-4);
  CHECK(max_abs_diff(attn.scores(padded).narrow(2, 0, 6).narrow(3, 0, 6), s0) > 1e-3);
}

TEST_CASE("llama: the config refuses a head dim it cannot use and a bad rotary setting, naming the field") {
  GPTConfig c = tiny({"QKV", Sharing::qkv, 0});
  c.attention.head_size = 0;
  c.attention.d_model = 26;  // 4 heads do not divide it
  CHECK_THROWS_WITH_AS(GPT{c}, doctest::Contains("must be a positive multiple of heads"), ValueError);
  c = tiny({"QKV", Sharing::qkv, 0});
  c.attention.rope->fraction = 0.1;  // less than one pair of 8 dims
  CHECK_THROWS_WITH_AS(GPT{c}, doctest::Contains("rope: the rotated fraction"), ValueError);
  c = tiny({"QKV", Sharing::qkv, 0});
  c.attention.rope->high_freq_factor = 0.5;
  CHECK_THROWS_WITH_AS(GPT{c}, doctest::Contains("llama3 scaling needs"), ValueError);
}
