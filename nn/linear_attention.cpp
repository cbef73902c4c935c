#include "nn/linear_attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"

namespace qkv::nn {
namespace {

// D [T, T]: lambda^(t - s) where s <= t, else 0, as float32 on `device`.
Tensor decay_mask(int64_t T, double decay, const Device& device) {
  std::vector<float> d(size_t(T * T), 0.0f);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t s = 0; s <= t; ++s) d[size_t(t * T + s)] = float(std::pow(decay, double(t - s)));
  return from_vector(d, {T, T}, device);
}

// [T] as [1, 1, T, 1]: lambda^(first + t), t = 0..T-1.
Tensor decay_powers(int64_t T, double decay, int64_t first, const Device& device) {
  std::vector<float> p(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) p[size_t(t)] = float(std::pow(decay, double(first + t)));
  return from_vector(p, {1, 1, T, 1}, device);
}

}  // namespace

Tensor positive_features(const Tensor& x) { return relu(x) + exp(-relu(-x)); }

Tensor linear_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, double decay) {
  check<ValueError>(decay > 0 && decay <= 1, "linear attention: the decay lambda must be in (0, 1], got ", decay);
  const Tensor fq = positive_features(q), fk = positive_features(k);
  Tensor a = matmul(fq, fk, false, true);  // [B, H, T, T]
  if (causal) a = a * decay_mask(q.size(2), decay, q.device()).to(a.dtype());
  return matmul(a, v) / sum(a, {-1}, true);
}

namespace {
// linear_attention_chunk on at most kBlock positions: the parallel form within them.
Tensor block_step(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& state, const Tensor& normalizer,
                  double decay) {
  const int64_t T = q.size(2);
  const Device dev = q.device();
  const Tensor fq = positive_features(q), fk = positive_features(k);
  // Within the chunk, the parallel form; the carried state enters decayed by lambda^(t + 1). A
  // one-position step (decoding) needs no host-built table, so a CUDA graph can capture it.
  Tensor a = matmul(fq, fk, false, true);                                   // [B, H, T, T]
  const Tensor carry = T == 1 ? Tensor() : decay_powers(T, decay, 1, dev);  // [1, 1, T, 1]
  if (T > 1) a = a * decay_mask(T, decay, dev);
  const Tensor from_state = matmul(fq, state), norm_state = matmul(fq, normalizer, false, true);
  const Tensor num = matmul(a, v) + (T == 1 ? from_state * decay : from_state * carry);        // [B, H, T, Dv]
  const Tensor den = sum(a, {-1}, true) + (T == 1 ? norm_state * decay : norm_state * carry);  // [B, H, T, 1]
  // After the chunk: S = lambda^T S + sum_s lambda^(T-1-s) phi(k_s) v_s^T, and n likewise.
  const Tensor wk = T == 1 ? fk : fk * decay_powers(T, 1.0 / decay, 1 - T, dev);  // lambda^(T-1-s) phi(k_s)
  const double lt = std::pow(decay, double(T));
  Tensor(state).copy_(state * lt + matmul(wk, v, true, false));  // handles: the caller's storage
  Tensor(normalizer).copy_(normalizer * lt + sum(wk, {2}, true));
  return num / den;
}

// Positions per block of a long chunk (a prefill): its [T, T] terms stay 64 x 64, so a prompt's
// memory grows linearly with its length, as the recurrence's does.
constexpr int64_t kBlock = 64;
}  // namespace

Tensor linear_attention_chunk(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& state,
                              const Tensor& normalizer, double decay) {
  check<ValueError>(decay > 0 && decay <= 1, "linear attention: the decay lambda must be in (0, 1], got ", decay);
  NoGradGuard no_grad;
  const int64_t T = q.size(2);
  if (T <= kBlock) return block_step(q, k, v, state, normalizer, decay);
  std::vector<Tensor> out;
  for (int64_t t0 = 0; t0 < T; t0 += kBlock) {
    const int64_t n = std::min(kBlock, T - t0);
    out.push_back(block_step(q.narrow(2, t0, n), k.narrow(2, t0, n), v.narrow(2, t0, n), state, normalizer, decay));
  }
  return concat(out, 2);
}

}  // namespace qkv::nn
