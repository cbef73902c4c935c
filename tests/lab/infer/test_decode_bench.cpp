// bench_decode on a tiny GPT: the cache it reports is the closed form for its batch and context,
// a K=V variant's cache is half of QKV's, and the allocator's peak covers the cache.
#include <doctest/doctest.h>

#include "lab/infer/decode_bench.h"

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
