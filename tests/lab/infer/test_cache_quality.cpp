// The validation loss through a KV cache (lab/infer/cache_quality.h): with a float32 cache it is
// the model's own loss on the same batches, and 16-bit and int8 caches stay close to it.
#include <doctest/doctest.h>

#include <cmath>

#include "autograd/autograd.h"
#include "lab/infer/cache_quality.h"
#include "tests/support/token_data.h"

using namespace qkv;

TEST_CASE("cache quality: a float32 cache gives the model's validation loss, bf16 and int8 stay close") {
  test::TempDir dir("cache-quality");
  const auto tokens = test::markov_token_dataset(dir.path, 64);
  nn::GPTConfig c;
  c.vocab = 64;
  c.context = 32;
  c.layers = 2;
  c.dropout = 0;
  c.attention.d_model = 32;
  c.attention.heads = 4;
  c.attention.sharing = nn::Sharing::q_kv;
  Generator g(3);
  nn::GPT model(c, &g);
  model.eval();
  data::TokenBatchOptions o;
  o.batch = 4;
  o.context = 32;
  o.shuffle = false;
  data::TokenBatches val(tokens, "val", o);

  double want = 0;  // the mean of the batches' losses: every target counts (packed windows)
  {
    NoGradGuard ng;
    Tensor in, target;
    for (int i = 0; i < 3; ++i) {
      val.next(in, target);
      want += model.loss(in, target).item<float>() / 3;
    }
  }
  const data::TokenCursor after = val.cursor();
  const infer::CacheQuality f32 = infer::cache_quality(model, val, 3, DType::f32);
  CHECK(val.cursor() == after);  // put back where the caller left it
  CHECK(f32.tokens == 3 * 4 * 32);
  CHECK(f32.loss == doctest::Approx(want).epsilon(1e-6));
  CHECK(f32.perplexity == doctest::Approx(std::exp(want)).epsilon(1e-6));
  for (DType dt : {DType::bf16, DType::i8}) {
    CAPTURE(std::string(dtype_name(dt)));
    const infer::CacheQuality q = infer::cache_quality(model, val, 3, dt);
    CHECK(q.loss != f32.loss);  // the cache's rounding reaches the loss
    CHECK(std::abs(q.loss - f32.loss) < 1e-2 * f32.loss);
  }
  CHECK_THROWS_AS(infer::cache_quality(model, val, 0, DType::f32), ValueError);
}
