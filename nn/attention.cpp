#include "nn/attention.h"

#include <cmath>

#include "nn/init.h"
#include "nn/kv_cache.h"
#include "nn/position.h"

namespace qkv::nn {

void AttentionConfig::validate() const {
  check<ValueError>(d_model > 0 && heads > 0 && d_model % heads == 0, "attention: d_model ", d_model,
                    " must be a positive multiple of heads ", heads);
  const int64_t hk = kv_head_count();
  check<ValueError>(hk > 0 && heads % hk == 0, "attention: ", heads, " heads cannot be grouped over kv_heads ", hk);
  for (Role r : {Role::k, Role::v})
    check<ValueError>(!pattern().ties(Role::q, r) || hk == heads, "attention: ", sharing_name(sharing), " ties ",
                      role_name(r), " to Q, so ", role_name(r), " has all ", heads, " heads; kv_heads ", kv_heads,
                      " (GQA/MQA) needs K and V untied from Q (QKV or Q-K=V)");
  check<ValueError>(pos2d >= 0 && pos2d % 2 == 0, "attention: pos2d channels must be even, got ", pos2d);
  check<ValueError>(pos2d == 0 || !causal,
                    "attention: the 2D positional scores are defined for non-causal "
                    "attention only (PAPER.md: '(+) ... non-causal tasks only')");
}

Attention::Attention(const AttentionConfig& c, Generator* gen) : o(c.d_model, c.d_model, c.bias, gen), config_(c) {
  c.validate();
  const SharingPattern& p = c.pattern();
  const int64_t d = c.d_model, dkv = c.kv_head_count() * c.head_dim();
  for (int i = 0; i < p.slot_count(); ++i) {
    slots_.push_back(std::make_unique<Linear>(d, p.serves_query(i) ? d : dkv, c.bias, gen));
    register_module(std::string(p.slot_name(i)), slots_.back().get());
  }
  register_module("o", &o);
  if (c.pos2d > 0) {
    pos2d_weight = init_normal({c.pos2d}, 0.02, kCPU, gen);
    pos2d_bias = zeros({1});
    register_parameter("pos2d.weight", &pos2d_weight);
    register_parameter("pos2d.bias", &pos2d_bias);
  }
}

Tensor Attention::split_heads(const Tensor& x, int64_t heads) const {
  const int64_t B = x.size(0), T = x.size(1);
  return x.reshape({B, T, heads, config_.head_dim()}).permute({0, 2, 1, 3});
}

Attention::Heads Attention::project(const Tensor& x) const {
  check<ShapeError>(x.dim() == 3 && x.size(2) == config_.d_model, "attention: expected input [batch, len, ",
                    config_.d_model, "], got ", shape_str(x.shape()));
  const SharingPattern& p = config_.pattern();
  std::vector<Tensor> out;  // one per slot, in slot order: a tied role gets the same handle
  for (int i = 0; i < p.slot_count(); ++i)
    out.push_back(
        split_heads(slots_[size_t(i)]->forward(x), p.serves_query(i) ? config_.heads : config_.kv_head_count()));
  return {out[size_t(p.slot_index(Role::q))], out[size_t(p.slot_index(Role::k))], out[size_t(p.slot_index(Role::v))]};
}

std::pair<Tensor, Tensor> Attention::pos2d_terms(int64_t T) const {
  const int64_t m = config_.pos2d;
  Tensor P;
  {
    std::lock_guard lock(table_mu_);
    Tensor& cached = pos2d_tables_[T];
    if (!cached.defined() || cached.device() != pos2d_weight.device())
      cached = pos2d_table(T, m).to(pos2d_weight.device());
    P = cached;
  }
  // Sum over channels of w_c * (S + P_c) + b, split into the score multiplier and the bias.
  Tensor bias = matmul(P.reshape({T * T, m}), pos2d_weight.reshape({m, 1})).reshape({T, T}) + pos2d_bias;
  return {bias, sum(pos2d_weight)};
}

Tensor Attention::forward(const Tensor& x) const {
  const int64_t B = x.size(0), T = x.size(1);
  Heads h = project(x);
  Tensor bias;
  Tensor q = h.q;
  if (config_.pos2d > 0) {
    auto [b, multiplier] = pos2d_terms(T);
    bias = b;
    q = q * multiplier;  // S sum(w) = scale (sum(w) q) k^T
  }
  Tensor y = attention(q, h.k, h.v, bias, config_.causal);  // [B, H, T, dh]
  return o.forward(y.permute({0, 2, 1, 3}).reshape({B, T, config_.d_model}));
}

Tensor Attention::forward_cached(const Tensor& x, KVCache& cache, int64_t layer) const {
  check<ValueError>(config_.causal && config_.pos2d == 0,
                    "attention: a KV cache serves causal attention without "
                    "2D positional scores");
  const int64_t B = x.size(0), T = x.size(1);
  Heads h = project(x);
  auto [k, v] = cache.append(layer, h.k, h.v);
  // A 16-bit cache is read in its dtype: the new queries are rounded to it (a few values) rather
  // than the cached prefix widened (every value, every step).
  Tensor y = attention(h.q.to(k.dtype()), k, v, Tensor(), /*causal=*/true).to(x.dtype());  // bottom-right causal
  return o.forward(y.permute({0, 2, 1, 3}).reshape({B, T, config_.d_model}));
}

Tensor Attention::decode_step(const Tensor& x, KVCache& cache, int64_t layer, const Tensor& start) const {
  check<ValueError>(config_.causal && config_.pos2d == 0,
                    "attention: a KV cache serves causal attention without 2D positional scores");
  const int64_t B = x.size(0), T = x.size(1);
  Heads h = project(x);
  auto [k, v] = cache.write_at(layer, h.k, h.v, start);
  Tensor y = cache_attention(h.q.to(k.dtype()), k, v, start).to(x.dtype());
  return o.forward(y.permute({0, 2, 1, 3}).reshape({B, T, config_.d_model}));
}

Tensor Attention::scores(const Tensor& x) const {
  const int64_t T = x.size(1), H = config_.heads, Hk = config_.kv_head_count();
  Heads h = project(x);
  Tensor k = h.k;
  if (Hk != H) {  // each KV head serves a contiguous group of query heads
    const Shape s = k.shape();
    k = k.unsqueeze(2).expand({s[0], Hk, H / Hk, s[2], s[3]}).reshape({s[0], H, s[2], s[3]});
  }
  Tensor s = matmul(h.q, k, false, true) * (1.0 / std::sqrt(double(config_.head_dim())));
  if (config_.pos2d > 0) {
    auto [bias, multiplier] = pos2d_terms(T);
    s = s * multiplier + bias;
  }
  return s;
}

Tensor Attention::probabilities(const Tensor& x) const {
  Tensor s = scores(x);
  if (config_.causal) {
    const int64_t T = s.size(-1);
    std::vector<uint8_t> mask(static_cast<size_t>(T * T));
    for (int64_t i = 0; i < T; ++i)
      for (int64_t j = i + 1; j < T; ++j) mask[size_t(i * T + j)] = 1;
    s = masked_fill(s, from_vector(mask, {T, T}, s.device()).to(DType::b8), -INFINITY);
  }
  return softmax(s, -1);
}

}  // namespace qkv::nn
