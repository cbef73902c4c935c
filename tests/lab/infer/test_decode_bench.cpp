// bench_decode on a tiny GPT: the cache it reports is the closed form for its batch and context,
// a K=V variant's cache is half of QKV's, and the allocator's peak covers the cache; the static
// decoder's tokens are forward_cached's.
#include <doctest/doctest.h>

#include "autograd/autograd.h"
#include "lab/infer/decode_bench.h"
#include "lab/infer/static_decoder.h"

using namespace qkv;

namespace {
nn::GPTConfig tiny(nn::Sharing sharing) {
  nn::GPTConfig c;
  c.vocab = 61;
  c.context = 32;
  c.layers = 2;
  c.dropout = 0.0;
  c.attention.d_model = 32;
  c.attention.heads = 4;
  c.attention.sharing = sharing;
  return c;
}
}  // namespace

TEST_CASE("lm decode bench: cache bytes, the K=V half, and the peak") {
  const int64_t batch = 2, context = 24;
  const nn::GPTConfig qkv = tiny(nn::Sharing::qkv), kv = tiny(nn::Sharing::q_kv);
  const auto full = infer::bench_decode(qkv, batch, context, 5, 6, DType::f32);
  CHECK(full.cache_bytes == nn::KVCache::bytes_per_token(qkv.attention, qkv.layers, DType::f32) * batch * context);
  CHECK(full.peak_bytes >= full.cache_bytes);
  CHECK(full.prefill_ms > 0);
  CHECK(full.decode_tokens_per_s > 0);
  const auto tied = infer::bench_decode(kv, batch, context, 5, 6, DType::f32);
  CHECK(2 * tied.cache_bytes == full.cache_bytes);
  CHECK(tied.peak_bytes >= tied.cache_bytes);
  const auto half = infer::bench_decode(qkv, batch, context, 5, 6, DType::bf16);
  CHECK(2 * half.cache_bytes == full.cache_bytes);
  CHECK_THROWS_AS(infer::bench_decode(qkv, batch, context, 20, 5, DType::f32), ValueError);  // past the cache
}

// The static decoder (GPT::decode_step with its inputs written before each step; a CUDA graph on
// a GPU, eager here) greedy-decodes exactly the tokens forward_cached does, and the bench runs
// through it.
TEST_CASE("lm decode: the static decoder greedy-decodes forward_cached's tokens") {
  for (nn::Sharing sharing : {nn::Sharing::qkv, nn::Sharing::q_kv, nn::Sharing::all}) {
    Generator gen(3);
    nn::GPT model(tiny(sharing), &gen);
    model.eval();
    NoGradGuard no_grad;
    const int64_t batch = 2, prompt = 4, steps = 10;
    const Tensor ids = cast(uniform({batch, prompt}, 0, 61, DType::f64, &gen), DType::i64);
    nn::KVCache eager = model.make_cache(batch, 24), fixed = model.make_cache(batch, 24);
    auto greedy = [](const Tensor& logits) { return argmax(logits.narrow(1, logits.size(1) - 1, 1), -1); };
    Tensor a = greedy(model.forward_cached(ids, eager)), b = greedy(model.forward_cached(ids, fixed));
    infer::StaticDecoder decoder(model, fixed);
    CHECK_FALSE(decoder.graphed());  // no CUDA graph on the CPU
    for (int64_t i = 0; i < steps; ++i) {
      REQUIRE(a.to_vector<int64_t>() == b.to_vector<int64_t>());
      a = greedy(model.forward_cached(a, eager));
      b = greedy(decoder.step(b, prompt + i));
    }
    CHECK_THROWS_WITH_AS(decoder.step(b, 24), doctest::Contains("position 24 is outside the cache's 24"), ValueError);
  }
  const auto r = infer::bench_decode(tiny(nn::Sharing::q_kv), 2, 24, 5, 6, DType::bf16, kCPU, /*static_step=*/true);
  CHECK(r.decode_tokens_per_s > 0);
  CHECK_FALSE(r.graphed);
}
