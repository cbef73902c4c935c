// Linear attention (nn/linear_attention.h, PAPER.md appendix) as properties: the parallel form
// equals the recurrence written out in double, chunked decoding over the carried state equals
// the parallel form, and the state's bytes do not depend on the length.
#include <doctest/doctest.h>

#include <cmath>

#include "autograd/autograd.h"
#include "nn/attention.h"
#include "nn/kv_cache.h"
#include "nn/linear_attention.h"
#include "nn/variant.h"

using namespace qkv;
using namespace qkv::nn;

namespace {

double max_abs_diff(const Tensor& a, const Tensor& b) { return amax(abs(a - b)).item<float>(); }

AttentionConfig linear_config(Sharing s, double decay) {
  AttentionConfig c;
  c.d_model = 16;
  c.heads = 2;
  c.sharing = s;
  c.causal = true;
  c.linear = true;
  c.linear_decay = decay;
  return c;
}

double phi(double x) { return x > 0 ? x + 1 : std::exp(x); }

}  // namespace

TEST_CASE("linear attention: the parallel form is the recurrence S_t = lambda S_t-1 + phi(z_t) z_t^T") {
  const int64_t T = 7, D = 3;
  const Tensor z = randn({1, 1, T, D});
  for (double lambda : {1.0, 0.8}) {
    CAPTURE(lambda);
    const Tensor y = linear_attention(z, z, z, true, lambda);  // Q=K=V: z everywhere
    const std::vector<float> zv = z.contiguous().to_vector<float>(), yv = y.contiguous().to_vector<float>();
    std::vector<double> S(size_t(D * D), 0.0), n(size_t(D), 0.0);
    for (int64_t t = 0; t < T; ++t) {
      const float* zt = &zv[size_t(t * D)];
      for (int64_t i = 0; i < D; ++i) {
        n[size_t(i)] = lambda * n[size_t(i)] + phi(zt[i]);
        for (int64_t j = 0; j < D; ++j) S[size_t(i * D + j)] = lambda * S[size_t(i * D + j)] + phi(zt[i]) * zt[j];
      }
      double den = 0;
      for (int64_t i = 0; i < D; ++i) den += phi(zt[i]) * n[size_t(i)];
      for (int64_t j = 0; j < D; ++j) {
        double num = 0;
        for (int64_t i = 0; i < D; ++i) num += phi(zt[i]) * S[size_t(i * D + j)];
        CHECK(yv[size_t(t * D + j)] == doctest::Approx(num / den).epsilon(1e-5));
      }
    }
  }
}

TEST_CASE("linear attention: decoding over the carried state equals the parallel form, in any chunks") {
  for (Sharing s : {Sharing::all, Sharing::qkv}) {
    for (double lambda : {1.0, 0.9}) {
      CAPTURE(sharing_name(s));
      CAPTURE(lambda);
      Attention a(linear_config(s, lambda));
      a.eval();
      NoGradGuard ng;
      const Tensor x = randn({2, 11, 16});
      const Tensor full = a.forward(x);
      KVCache cache(a.config(), 1, 2, 11);
      std::vector<Tensor> parts;
      int64_t at = 0;
      for (int64_t chunk : {4, 1, 3, 1, 1, 1}) {
        parts.push_back(a.forward_cached(x.narrow(1, at, chunk), cache, 0));
        cache.advance(chunk);
        at += chunk;
      }
      CHECK(max_abs_diff(concat(parts, 1), full) < 1e-5);
      cache.reset();  // the state back to zero: the same outputs again
      CHECK(max_abs_diff(a.forward_cached(x.narrow(1, 0, 4), cache, 0), full.narrow(1, 0, 4)) < 1e-5);
    }
  }
  // A prompt longer than a block (64 positions) runs block by block over the carried state.
  Attention a(linear_config(Sharing::all, 0.95));
  a.eval();
  NoGradGuard ng;
  const Tensor x = randn({1, 150, 16});
  KVCache cache(a.config(), 1, 1, 150);
  CHECK(max_abs_diff(a.forward_cached(x, cache, 0), a.forward(x)) < 1e-5);
}

TEST_CASE("linear attention: the cache is a state of the same bytes at every length, and its gradients flow") {
  const AttentionConfig c = linear_config(Sharing::all, 1.0);
  const KVCache short_cache(c, 3, 2, 16), long_cache(c, 3, 2, 4096);
  CHECK(short_cache.bytes() == long_cache.bytes());
  CHECK(short_cache.bytes() == 2 * KVCache::bytes_per_sequence(c, 3));
  CHECK(KVCache::bytes_per_sequence(c, 3) == 3 * 2 * (8 * 8 + 8) * 4);
  CHECK(KVCache::bytes_per_token(c, 3, DType::bf16) == 0);

  Attention a(c);
  sum(a.forward(randn({2, 5, 16}))).backward();
  for (const auto& [name, t] : a.named_parameters()) {
    CAPTURE(name);
    REQUIRE(t.grad().defined());
    CHECK(amax(abs(t.grad())).item<float>() > 0);
  }
  // Names, and the forms it cannot take.
  CHECK(parse_variant("Q=K=V+linear") == Variant{Sharing::all, 0, false, 0, true});
  CHECK(variant_name(parse_variant("k+linear")) == "Q=K=V+linear");
  CHECK_FALSE(try_parse_variant("MQA+linear").has_value());
  AttentionConfig gqa = c;
  gqa.sharing = Sharing::qkv;
  gqa.kv_heads = 1;
  CHECK_THROWS_WITH_AS(gqa.validate(), doctest::Contains("linear attention takes as many KV heads"), ValueError);
}
