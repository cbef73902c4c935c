#include "nn/attention.h"

#include <cmath>
#include <tuple>

#include "nn/init.h"
#include "nn/kv_cache.h"
#include "nn/linear_attention.h"
#include "nn/position.h"

namespace qkv::nn {

void AttentionConfig::validate() const {
  check<ValueError>(d_model > 0 && heads > 0 && head_size >= 0 && (head_size > 0 || d_model % heads == 0),
                    "attention: d_model ", d_model, " must be a positive multiple of heads ", heads,
                    " unless the head dim is given, got head dim ", head_size);
  if (rope) {
    rope->validate(head_dim());
    check<ValueError>(!linear, "attention: rotary positions are for softmax attention, not linear attention");
  }
  const int64_t hk = kv_head_count();
  check<ValueError>(hk > 0 && heads % hk == 0, "attention: ", heads, " heads cannot be grouped over kv_heads ", hk);
  for (Role r : {Role::k, Role::v})
    check<ValueError>(!pattern().ties(Role::q, r) || hk == heads, "attention: ", sharing_name(sharing), " ties ",
                      role_name(r), " to Q, so ", role_name(r), " has all ", heads, " heads; kv_heads ", kv_heads,
                      " (GQA/MQA) needs K and V untied from Q (QKV or Q-K=V)");
  check<ValueError>(pos2d >= 0 && pos2d % 2 == 0, "attention: pos2d channels must be even, got ", pos2d);
  check<ValueError>(v_rank == 0 || (pattern().has_v_residual() && v_rank <= head_dim()), "attention: a low-rank V ",
                    "residual (rank ", v_rank, ") needs a row whose V is K (Q-K=V, Q=K=V) and a rank of at most the ",
                    "head dim ", head_dim(), "; got ", sharing_name(sharing));
  check<ValueError>(!linear || (hk == heads && v_rank == 0 && pos2d == 0 && linear_decay > 0 && linear_decay <= 1),
                    "attention: linear attention takes as many KV heads as heads, no low-rank V residual, no 2D ",
                    "scores and a decay in (0, 1]; got kv_heads ", kv_heads, ", v_rank ", v_rank, ", pos2d ", pos2d,
                    ", decay ", linear_decay);
  check<ValueError>(pos2d == 0 || !causal,
                    "attention: the 2D positional scores are defined for non-causal "
                    "attention only (PAPER.md: '(+) ... non-causal tasks only')");
}

Attention::Attention(const AttentionConfig& c, Generator* gen)
    : o(c.query_width(), c.d_model, c.bias, gen), config_(c) {
  c.validate();
  const SharingPattern& p = c.pattern();
  const int64_t d = c.d_model, dkv = c.kv_head_count() * c.head_dim();
  for (int i = 0; i < p.slot_count(); ++i) {
    slots_.push_back(std::make_unique<Linear>(d, p.serves_query(i) ? c.query_width() : dkv, c.bias, gen));
    register_module(std::string(p.slot_name(i)), slots_.back().get());
  }
  register_module("o", &o);
  if (c.v_rank > 0) {
    v_down = std::make_unique<Linear>(d, c.kv_head_count() * c.v_rank, c.bias, gen);
    register_module("v_down", v_down.get());
    v_up = init_normal({c.kv_head_count(), c.v_rank, c.head_dim()}, 0.02, kCPU, gen);
    register_parameter("v_up", &v_up);
  }
  if (c.pos2d > 0) {
    pos2d_weight = init_normal({c.pos2d}, 0.02, kCPU, gen);
    pos2d_bias = zeros({1});
    register_parameter("pos2d.weight", &pos2d_weight);
    register_parameter("pos2d.bias", &pos2d_bias);
  }
}

Tensor Attention::split_heads(const Tensor& x, int64_t heads, int64_t width) const {
  const int64_t B = x.size(0), T = x.size(1);
  return x.reshape({B, T, heads, width > 0 ? width : config_.head_dim()}).permute({0, 2, 1, 3});
}

RotaryTables Attention::rotary(int64_t rows, const Device& device) const {
  std::lock_guard lock(table_mu_);
  for (auto& [d, t] : rope_tables_)
    if (d == device) {
      if (t.cos.size(0) < rows)
        t = rope_tables(*config_.rope, config_.head_dim(), std::max(rows, 2 * t.cos.size(0)), device);
      return t;
    }
  rope_tables_.emplace_back(device,
                            rope_tables(*config_.rope, config_.head_dim(), std::max<int64_t>(rows, 64), device));
  return rope_tables_.back().second;
}

Attention::Heads Attention::project_slots(const Tensor& x, const TokenPositions& at) const {
  check<ShapeError>(x.dim() == 3 && x.size(2) == config_.d_model, "attention: expected input [batch, len, ",
                    config_.d_model, "], got ", shape_str(x.shape()));
  const SharingPattern& p = config_.pattern();
  const int64_t B = x.size(0), T = x.size(1);
  // The rotary tables for these tokens: rows [first, first + T), or all rows with a device start.
  RotaryTables turn;
  if (config_.rope) {
    turn = rotary(at.start.defined() ? at.capacity : at.first + T, x.device());
    if (!at.start.defined()) turn = {turn.cos.narrow(0, at.first, T), turn.sin.narrow(0, at.first, T)};
  }
  // One per slot, in slot order: a tied role gets the same handle. Slots serving Q or K are
  // turned once (their tokens [B, T, h, dh]), the slot serving V never.
  std::vector<Tensor> plain, turned;
  for (int i = 0; i < p.slot_count(); ++i) {
    const int64_t h = p.serves_query(i) ? config_.heads : config_.kv_head_count();
    const Tensor tokens = slots_[size_t(i)]->forward(x).reshape({B, T, h, config_.head_dim()});
    const bool positional = p.slot_index(Role::q) == i || p.slot_index(Role::k) == i;
    plain.push_back(tokens.permute({0, 2, 1, 3}));
    turned.push_back(config_.rope && positional ? rope(tokens, turn, at.start).permute({0, 2, 1, 3}) : plain.back());
  }
  return {turned[size_t(p.slot_index(Role::q))], turned[size_t(p.slot_index(Role::k))],
          plain[size_t(p.slot_index(Role::v))]};
}

Attention::Heads Attention::project(const Tensor& x) const {
  Heads h = project_slots(x);
  if (config_.v_rank > 0)  // V = K + (X A) B, per KV head
    h.v = h.v + matmul(split_heads(v_down->forward(x), config_.kv_head_count(), config_.v_rank), v_up);
  return h;
}

Tensor Attention::cache_rows(const Tensor& x, const Heads& h) const {
  const Tensor& keys = keys_turned_on_read() ? h.v : h.k;  // K=V under RoPE: s, turned as read
  if (config_.v_rank == 0) return keys;
  return concat({keys, split_heads(v_down->forward(x), config_.kv_head_count(), config_.v_rank)}, -1);
}

Tensor Attention::finish_residual(const Tensor& y) const {
  const int64_t dh = config_.head_dim(), r = config_.v_rank, H = config_.heads, Hk = config_.kv_head_count();
  if (r == 0) return y;
  Tensor up = v_up;  // [Hk, r, dh] -> one per query head
  if (Hk != H) up = up.unsqueeze(1).expand({Hk, H / Hk, r, dh}).reshape({H, r, dh});
  return y.narrow(-1, 0, dh) + matmul(y.narrow(-1, dh, r), up.to(y.dtype()));
}

Tensor Attention::merge_heads(const Tensor& y) const {
  const int64_t B = y.size(0), T = y.size(2);
  return o.forward(y.permute({0, 2, 1, 3}).reshape({B, T, config_.query_width()}));
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

namespace {
thread_local AttentionInputProbe* active_probe = nullptr;
}  // namespace

AttentionInputProbe::AttentionInputProbe(Callback callback) : callback_(std::move(callback)), outer_(active_probe) {
  active_probe = this;
}
AttentionInputProbe::~AttentionInputProbe() { active_probe = outer_; }
void AttentionInputProbe::notify(const Attention& attention, const Tensor& x) {
  if (active_probe) active_probe->callback_(attention, x);
}

Tensor Attention::forward(const Tensor& x) const {
  AttentionInputProbe::notify(*this, x);
  const int64_t T = x.size(1);
  Heads h = project(x);
  Tensor bias;
  Tensor q = h.q;
  if (config_.pos2d > 0) {
    auto [b, multiplier] = pos2d_terms(T);
    bias = b;
    q = q * multiplier;  // S sum(w) = scale (sum(w) q) k^T
  }
  if (config_.linear) return merge_heads(linear_attention(h.q, h.k, h.v, config_.causal, config_.linear_decay));
  return merge_heads(attention(q, h.k, h.v, bias, config_.causal));  // [B, H, T, dh] -> [B, T, d]
}

Tensor Attention::forward_cached(const Tensor& x, KVCache& cache, int64_t layer) const {
  check<ValueError>(config_.causal && config_.pos2d == 0,
                    "attention: a KV cache serves causal attention without "
                    "2D positional scores");
  if (config_.linear) return linear_step(x, cache, layer);  // the cache is a state: no position
  // An int8 cache is read with its scales by cache_attention, and keys stored unrotated are turned
  // by it as read: the static step at this position.
  if (cache.quantized() || keys_turned_on_read())
    return decode_step(x, cache, layer, full({1}, double(cache.length()), TensorOptions(DType::i64, x.device())));
  Heads h = project_slots(x, {cache.length(), Tensor(), 0});
  const Tensor rows = cache_rows(x, h);
  auto [k, v] = cache.append(layer, rows, h.v);
  if (config_.v_rank > 0) std::tie(k, v) = std::pair(k.narrow(-1, 0, config_.head_dim()), k);
  // A 16-bit cache is read in its dtype: the new queries are rounded to it (a few values) rather
  // than the cached prefix widened (every value, every step).
  Tensor y = attention(h.q.to(k.dtype()), k, v, Tensor(), /*causal=*/true).to(x.dtype());  // bottom-right causal
  return merge_heads(finish_residual(y));
}

Tensor Attention::decode_step(const Tensor& x, KVCache& cache, int64_t layer, const Tensor& start) const {
  check<ValueError>(config_.causal && config_.pos2d == 0,
                    "attention: a KV cache serves causal attention without 2D positional scores");
  if (config_.linear) return linear_step(x, cache, layer);  // the state carries the position
  Heads h = project_slots(x, {0, start, cache.capacity()});
  CachedKV c = cache.write_at(layer, cache_rows(x, h), h.v, start);
  if (config_.v_rank > 0) {  // the rows serve as values; their first d_head columns as keys
    c.values = c.keys;
    c.value_scales = c.key_scales;
    c.keys = c.keys.narrow(-1, 0, config_.head_dim());
  }
  const RotaryTables on_read = keys_turned_on_read() ? rotary(cache.capacity(), x.device()) : RotaryTables{};
  Tensor y = c.quantized()
                 ? cache_attention_int8(h.q, c.keys, c.key_scales, c.values, c.value_scales, start, true, 0, on_read)
                 : cache_attention(h.q.to(c.keys.dtype()), c.keys, c.values, start, true, 0, on_read).to(x.dtype());
  return merge_heads(finish_residual(y));
}

Tensor Attention::linear_step(const Tensor& x, KVCache& cache, int64_t layer) const {
  const Heads h = project_slots(x);
  auto [state, normalizer] = cache.linear_state(layer);
  return merge_heads(linear_attention_chunk(h.q, h.k, h.v, state, normalizer, config_.linear_decay));
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
  if (config_.linear) {  // phi(q) phi(k)^T, masked and decayed, each row normalized
    const Heads h = project(x);
    const int64_t T = x.size(1);
    std::vector<float> identity(size_t(T * T), 0.0f);
    for (int64_t i = 0; i < T; ++i) identity[size_t(i * T + i)] = 1.0f;
    const Tensor values = from_vector(identity, {T, T}, x.device()).expand({h.k.size(0), h.k.size(1), T, T});
    return linear_attention(h.q, h.k, values, config_.causal, config_.linear_decay);  // A I / A 1
  }
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
