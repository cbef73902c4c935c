#include "lab/infer/cache_quality.h"

#include <cmath>

#include "autograd/grad_mode.h"

namespace qkv::infer {

CacheQuality cache_quality(const nn::GPT& model, data::TokenBatches& val, int64_t batches, DType cache_dtype) {
  check<ValueError>(batches > 0, "cache_quality: batches must be positive, got ", batches);
  NoGradGuard no_grad;
  const Device device = model.wte.weight.device();
  const data::TokenCursor start = val.cursor();
  val.seek({});
  double total = 0;
  CacheQuality q;
  Tensor in, target;
  for (int64_t b = 0; b < batches; ++b) {
    val.next(in, target);
    const int64_t N = in.size(0), T = in.size(1);
    int64_t scored = 0;
    for (int64_t t : target.to_vector<int64_t>()) scored += t != data::kIgnoreTarget;
    if (scored == 0) continue;
    nn::KVCache cache = model.make_cache(N, T, cache_dtype);
    const Tensor logits = model.forward_cached(in.to(device), cache);
    const Tensor loss = cross_entropy(logits.reshape({N * T, -1}), target.reshape({N * T}).to(device));
    total += loss.to(DType::f64).item<double>() * double(scored);
    q.tokens += scored;
  }
  val.seek(start);
  check<ValueError>(q.tokens > 0, "cache_quality: the validation batches hold no target to score");
  q.loss = total / double(q.tokens);
  q.perplexity = std::exp(q.loss);
  return q;
}

}  // namespace qkv::infer
