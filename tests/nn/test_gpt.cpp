// GPT: parameter counts and MACs against the paper's closed forms, the tied output layer,
// decoding over the KV cache against the full forward pass for every variant (float32, 16-bit
// and int8 caches), and the cache's bytes as the allocator counts them.
#include <doctest/doctest.h>

#include <cmath>

#include "autograd/autograd.h"
#include "nn/models/gpt.h"
#include "nn/variant.h"
#include "tensor/allocator.h"

using namespace qkv;
using namespace qkv::nn;

namespace {

struct LmVariant {
  std::string name;
  Sharing sharing;
  int64_t kv_heads;     // 0: MHA
  int64_t v_rank = 0;   // the low-rank V residual's rank
  bool linear = false;  // linear attention: the cache is a fixed-size state
};
// Every row of the sharing table, and with 4 heads its GQA-2 and MQA forms where it has them:
// the language-model study's eight variants and any row added since; and a low-rank V
// residual (rank 3 of d_head 8) on each of those whose V is K, and linear attention on
// Q=K=V (the appendix's) and QKV.
const std::vector<LmVariant> kVariants = [] {
  std::vector<LmVariant> out;
  for (const SharingPattern& p : sharing_table())
    for (int64_t kv_heads : {0, 2, 1})
      if (kv_heads == 0 || has_head_sharing_forms(p.id)) {
        out.push_back({variant_name({p.id, kv_heads, false}), p.id, kv_heads});
        if (p.has_v_residual()) out.push_back({variant_name({p.id, kv_heads, false, 3}), p.id, kv_heads, 3});
      }
  for (Sharing s : {Sharing::all, Sharing::qkv}) out.push_back({variant_name({s, 0, false, 0, true}), s, 0, 0, true});
  return out;
}();

const LmVariant& find(const std::string& name) {
  for (const LmVariant& v : kVariants)
    if (v.name == name) return v;
  FAIL("no variant " << name);
  return kVariants.front();
}

GPTConfig tiny(const LmVariant& v) {
  GPTConfig c;
  c.vocab = 97;
  c.context = 24;
  c.layers = 2;
  c.dropout = 0.0;
  c.attention.d_model = 32;
  c.attention.heads = 4;
  c.attention.kv_heads = v.kv_heads;
  c.attention.sharing = v.sharing;
  c.attention.v_rank = v.v_rank;
  c.attention.linear = v.linear;
  return c;
}

GPTConfig paper_300m(Sharing s, int64_t kv_heads = 0) {
  GPTConfig c;
  c.vocab = 50304;
  c.context = 2048;
  c.layers = 20;
  c.ffn = 4096;
  c.attention.d_model = 1024;
  c.attention.heads = 16;
  c.attention.kv_heads = kv_heads;
  c.attention.sharing = s;
  return c;
}

Tensor random_ids(int64_t B, int64_t T, int64_t vocab, uint64_t seed) {
  Generator g(seed);
  std::vector<int64_t> ids(size_t(B * T));
  Tensor u = uniform({B * T}, 0.0, double(vocab), {}, &g);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = std::min<int64_t>(vocab - 1, int64_t(u.data<float>()[i]));
  return from_vector(ids, {B, T});
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  Tensor x = a.to(DType::f32).contiguous(), y = b.to(DType::f32).contiguous();
  double m = 0;
  for (int64_t i = 0; i < x.numel(); ++i) m = std::max(m, std::fabs(double(x.data<float>()[i]) - y.data<float>()[i]));
  return m;
}

}  // namespace

TEST_CASE("gpt: the closed-form parameter count equals the model's for every variant") {
  for (const auto& v : kVariants) {
    CAPTURE(v.name);
    Generator g(1);
    GPT model(tiny(v), &g);
    CHECK(model.num_parameters() == gpt_parameter_count(tiny(v)));
  }
}

TEST_CASE("gpt: the paper's 300M parameter counts and GMACs at 2048 tokens") {
  CHECK(gpt_parameter_count(paper_300m(Sharing::qkv)) == 305534976);
  CHECK(gpt_parameter_count(paper_300m(Sharing::q_kv)) == 284542976);
  CHECK(gpt_parameter_count(paper_300m(Sharing::qk_v)) == 284542976);
  CHECK(gpt_parameter_count(paper_300m(Sharing::all)) == 263550976);
  // PAPER.md: 792.69 / 749.74 / 706.79 GMACs for QKV / two projections / Q=K=V.
  CHECK(std::llround(gpt_macs(paper_300m(Sharing::qkv), 2048).total() / 1e7) == 79269);
  CHECK(std::llround(gpt_macs(paper_300m(Sharing::q_kv), 2048).total() / 1e7) == 74974);
  CHECK(std::llround(gpt_macs(paper_300m(Sharing::all), 2048).total() / 1e7) == 70679);
}

TEST_CASE("gpt: the output layer is the token embedding, and both of its uses get gradient") {
  const LmVariant& v = find("QKV");
  Generator g(2);
  GPT model(tiny(v), &g);
  const auto names = model.named_parameters();
  int wte = 0;
  for (const auto& [name, p] : names) wte += name == "wte.weight";
  CHECK(wte == 1);
  Tensor ids = random_ids(2, 8, 97, 3);
  model.loss(ids, random_ids(2, 8, 97, 4)).backward();
  // A token that never appears in the input still gets gradient through the output layer.
  Tensor grad = model.wte.weight.grad();
  REQUIRE(grad.defined());
  double row_norm = 0;
  for (int64_t i = 0; i < 32; ++i) row_norm += std::fabs(grad.contiguous().data<float>()[96 * 32 + i]);
  CHECK(row_norm > 0);
}

TEST_CASE("gpt: prefill plus one-token decoding over the KV cache equals the full forward pass") {
  for (const auto& v : kVariants) {
    CAPTURE(v.name);
    Generator g(5);
    GPT model(tiny(v), &g);
    model.eval();
    NoGradGuard no_grad;
    const int64_t B = 2, T = 20, prompt = 7;
    Tensor ids = random_ids(B, T, 97, 6);
    Tensor full = model.forward(ids);  // [B, T, V]
    KVCache cache = model.make_cache(B);
    Tensor logits = model.forward_cached(ids.narrow(1, 0, prompt), cache);
    CHECK(max_abs_diff(logits, full.narrow(1, 0, prompt)) < 1e-5);
    for (int64_t t = prompt; t < T; ++t) {
      Tensor step = model.forward_cached(ids.narrow(1, t, 1), cache);
      CHECK(max_abs_diff(step, full.narrow(1, t, 1)) < 1e-5);
    }
    CHECK(cache.length() == T);
    CHECK_THROWS_AS(model.forward_cached(ids, cache), ValueError);  // past the context
  }
}

// The static step (positions on the device, what a CUDA graph captures) against the cached
// forward, every variant, float32 and bf16 caches: the same logits bit for bit, since both run
// the same kernels on the same values, the attention only over the keys in use.
TEST_CASE("gpt: decode_step with device-side positions gives forward_cached's logits exactly") {
  for (DType cache_dtype : {DType::f32, DType::bf16, DType::i8})
    for (const auto& v : kVariants) {
      CAPTURE(v.name);
      CAPTURE(std::string(dtype_name(cache_dtype)));
      Generator g(5);
      GPT model(tiny(v), &g);
      model.eval();
      NoGradGuard no_grad;
      const int64_t B = 2, T = 12, prompt = 5;
      Tensor ids = random_ids(B, T, 97, 6);
      KVCache eager = model.make_cache(B, 0, cache_dtype), fixed = model.make_cache(B, 0, cache_dtype);
      Tensor want = model.forward_cached(ids.narrow(1, 0, prompt), eager);
      Tensor got = model.decode_step(ids.narrow(1, 0, prompt), arange(prompt, DType::i64), fixed);
      CHECK(max_abs_diff(got, want) == 0);
      Tensor position = zeros({1}, DType::i64);  // written in place each step, as a graph's input
      for (int64_t t = prompt; t < T; ++t) {
        position.fill_(double(t));
        want = model.forward_cached(ids.narrow(1, t, 1), eager);
        got = model.decode_step(ids.narrow(1, t, 1), position, fixed);
        REQUIRE(max_abs_diff(got, want) == 0);
      }
      CHECK(fixed.length() == 0);  // the host's count is the caller's
      // A position inside the context but past a smaller cache: kv_write refuses it (a linear
      // attention state has no rows to overrun).
      if (v.linear) continue;
      KVCache small = model.make_cache(B, 8, cache_dtype);
      position.fill_(8);
      CHECK_THROWS_WITH_AS(model.decode_step(ids.narrow(1, 0, 1), position, small),
                           doctest::Contains("kv_write: index 8 at position 0 is out of range [0, 8)"), IndexError);
    }
}

TEST_CASE("gpt: a bfloat16 cache decodes close to the float32 forward pass") {
  Generator g(7);
  GPT model(tiny(find("Q-K=V")), &g);
  model.eval();
  NoGradGuard no_grad;
  Tensor ids = random_ids(1, 12, 97, 8);
  Tensor full = model.forward(ids);
  KVCache cache = model.make_cache(1, 0, DType::bf16);
  model.forward_cached(ids.narrow(1, 0, 6), cache);
  Tensor step = model.forward_cached(ids.narrow(1, 6, 1), cache);
  CHECK(max_abs_diff(step, full.narrow(1, 6, 1)) < 5e-2);
}

TEST_CASE("kv cache: a bf16 cache is read in place, and attention over it matches float32") {
  AttentionConfig a;
  a.d_model = 16;
  a.heads = 2;
  a.sharing = find("Q-K=V").sharing;  // K=V: one cached tensor serves keys and values
  KVCache cache(a, 1, 1, 32, DType::bf16);
  Generator g(3);
  const Tensor k1 = randn({1, 2, 20, 8}, {}, &g), k2 = randn({1, 2, 1, 8}, {}, &g);
  const auto [keys1, values1] = cache.append(0, k1, k1);
  cache.advance(20);
  const auto [keys2, values2] = cache.append(0, k2, k2);
  CHECK(keys2.dtype() == DType::bf16);  // no float32 copy of the prefix
  CHECK(keys2.storage() == keys1.storage());
  CHECK(values2.raw_data() == keys2.raw_data());
  CHECK(keys2.size(2) == 21);
  CHECK(max_abs_diff(keys2.narrow(2, 0, 20), k1.to(DType::bf16)) == 0);

  NoGradGuard no_grad;
  const Tensor q = randn({1, 2, 1, 8}, {}, &g).to(DType::bf16);
  const Tensor y = attention(q, keys2, values2, Tensor(), true);  // the CPU kernel reads bf16 tiles
  CHECK(y.dtype() == DType::bf16);
  const Tensor k32 = keys2.to(DType::f32);
  const Tensor want = attention(q.to(DType::f32), k32, k32, Tensor(), true);
  CHECK(max_abs_diff(y, want) < 1e-2);
  CHECK(max_abs_diff(y, want) > 0);  // the output is rounded to bf16
}

TEST_CASE("kv cache: bytes from the allocator equal the closed form and K=V stores one tensor") {
  for (const auto& v : kVariants) {
    CAPTURE(v.name);
    GPTConfig c = tiny(v);
    c.attention.causal = true;
    for (DType dt : {DType::f32, DType::bf16, DType::i8}) {
      const size_t before = memory_stats(kCPU).current;
      {
        KVCache cache(c.attention, c.layers, 3, 16, dt);
        const int64_t expected = (KVCache::bytes_per_token(c.attention, c.layers, dt) * 16 +
                                  KVCache::bytes_per_sequence(c.attention, c.layers)) *
                                 3;
        CHECK(cache.bytes() == expected);
        CHECK(int64_t(memory_stats(kCPU).current - before) == expected);
        CHECK(cache.stores_values() == !sharing_pattern(v.sharing).ties(Role::k, Role::v));
      }
      CHECK(memory_stats(kCPU).current == before);
    }
  }
  GPTConfig qkv = tiny(find("QKV")), q_mqa = tiny(find("Q-MQA"));
  // 4 heads: K=V halves the cache, one KV head divides it by 4 more.
  CHECK(KVCache::bytes_per_token(qkv.attention, 2, DType::f32) == 2 * 4 * 8 * 4 * 2);
  CHECK(KVCache::bytes_per_token(q_mqa.attention, 2, DType::f32) == 1 * 1 * 8 * 4 * 2);
  // int8: a byte per value and a float32 scale per row (position and KV head).
  CHECK(KVCache::bytes_per_token(qkv.attention, 2, DType::i8) == 2 * 4 * (8 + 4) * 2);
  CHECK(KVCache::bytes_per_token(q_mqa.attention, 2, DType::i8) == 1 * 1 * (8 + 4) * 2);
}

TEST_CASE("quantize_int8: each value within half a step of its row's scale, zero rows exact, non-finite rows kept") {
  Generator g(11);
  const Tensor x = randn({3, 5, 16}, {}, &g) * 3.0;
  auto [q, scale] = quantize_int8(x);
  REQUIRE(q.dtype() == DType::i8);
  REQUIRE(scale.shape() == Shape{3, 5, 1});
  const Tensor back = q.to(DType::f32) * scale;
  const Tensor err = abs(back - x);
  const float* e = err.contiguous().data<float>();
  const float* s = scale.contiguous().data<float>();
  for (int64_t i = 0; i < x.numel(); ++i) CHECK(e[i] <= 0.5f * s[i / 16] * (1 + 1e-6f));
  for (int64_t r = 0; r < 15; ++r) CHECK(s[r] > 0);
  // The largest value of each row is +-127 exactly.
  const Tensor row_max = amax(abs(q.to(DType::f32)), {-1}).contiguous();
  for (int64_t r = 0; r < 15; ++r) CHECK(row_max.data<float>()[r] == 127.0f);

  Tensor special = zeros({3, 4});
  special.narrow(0, 1, 1).fill_(2.0);
  special.narrow(0, 2, 1).fill_(1.0);
  special.narrow(0, 2, 1).narrow(1, 3, 1).fill_(NAN);
  auto [q2, s2] = quantize_int8(special);
  CHECK(s2.data<float>()[0] == 0);  // a zero row: scale 0, values 0, dequantized exactly
  CHECK(max_abs_diff(q2.narrow(0, 0, 1).to(DType::f32), zeros({1, 4})) == 0);
  CHECK(std::fabs(s2.data<float>()[1] - 2.0f / 127) < 1e-9);
  CHECK(std::isnan(s2.data<float>()[2]));  // the NaN is not lost: the row dequantizes to NaN
}

// int8 rows (dh + 4 bytes instead of 4 dh) against the float32 forward pass: every variant
// stays within a bound set by the quantization step (about 1/254 of each row's largest value).
TEST_CASE("gpt: an int8 cache decodes close to the float32 forward pass for every variant") {
  for (const auto& v : kVariants) {
    if (v.linear) continue;  // its state stays float32
    CAPTURE(v.name);
    Generator g(7);
    GPT model(tiny(v), &g);
    model.eval();
    NoGradGuard no_grad;
    const int64_t T = 12, prompt = 6;
    Tensor ids = random_ids(2, T, 97, 8);
    Tensor full = model.forward(ids);
    KVCache cache = model.make_cache(2, 0, DType::i8);
    double worst = max_abs_diff(model.forward_cached(ids.narrow(1, 0, prompt), cache), full.narrow(1, 0, prompt));
    for (int64_t t = prompt; t < T; ++t)
      worst = std::max(worst, max_abs_diff(model.forward_cached(ids.narrow(1, t, 1), cache), full.narrow(1, t, 1)));
    CHECK(worst > 0);     // the cache is quantized, not float
    CHECK(worst < 3e-3);  // measured: at most 9.3e-4 over the variants
  }
}

TEST_CASE("gpt: model.activation gelu_tanh is GPT-2's gelu_new in every MLP, exact GELU the default") {
  GPTConfig c = tiny(kVariants.front());  // QKV
  c.dropout = 0;
  Generator g1(7), g2(7);
  GPT exact(c, &g1);
  c.activation = Activation::gelu_tanh;
  GPT tanh_form(c, &g2);  // the same weights: the same generator stream
  exact.eval();
  tanh_form.eval();
  NoGradGuard no_grad;
  const Tensor ids = from_vector(std::vector<int64_t>{1, 5, 2, 7, 3, 0}, {1, 6});
  const std::vector<float> a = exact.forward(ids).to_vector<float>(), b = tanh_form.forward(ids).to_vector<float>();
  double most = 0;
  for (size_t i = 0; i < a.size(); ++i) most = std::max(most, double(std::abs(a[i] - b[i])));
  CHECK(most > 1e-6);  // the forms differ (by about 1e-3 of an activation at most)
  // The first block: x + attention, then + proj(gelu_tanh(fc(ln2(that)))).
  const GPTBlock& block = *tanh_form.blocks[0];
  const Tensor x = randn({1, 6, c.d_model()}, {}, &g1);
  const Tensor h = block.forward(x);
  const Tensor after_attention = x + block.attn.forward(block.ln1.forward(x));
  const std::vector<float> want =
      (after_attention + block.proj.forward(gelu(block.fc.forward(block.ln2.forward(after_attention)), true)))
          .to_vector<float>();
  const std::vector<float> got = h.to_vector<float>();
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-5));
}
