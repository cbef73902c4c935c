#include "nn/models/gpt.h"

#include "autograd/grad_mode.h"
#include "nn/init.h"

namespace qkv::nn {

void GPTConfig::validate() const {
  check<ValueError>(vocab > 0 && context > 0 && layers > 0 && ffn >= 0, "gpt: vocab ", vocab, ", context ", context,
                    ", layers ", layers, " must be positive and ffn ", ffn, " non-negative");
  check<ValueError>(dropout >= 0 && dropout < 1, "gpt: dropout must be in [0, 1), got ", dropout);
  check<ValueError>(norm_eps >= 0, "gpt: norm eps must be non-negative, got ", norm_eps);
  check<ValueError>(attention.pos2d == 0, "gpt: the 2D positional scores are for non-causal tasks only");
  AttentionConfig a = attention;
  a.causal = true;
  a.validate();
}

GPTConfig llama_block(GPTConfig c, const RopeConfig& rope) {
  c.norm = NormKind::rms;
  c.norm_eps = 1e-6;
  c.mlp = MlpKind::swiglu;
  c.mlp_bias = false;
  c.attention.bias = false;
  c.attention.rope = rope;
  return c;
}

namespace {
int64_t projection_width(const GPTConfig& c) {
  const AttentionConfig& a = c.attention;
  return a.pattern().projection_width(a.query_width(), a.kv_head_count() * a.head_dim());
}
// The low-rank V residual's A: d -> Hk r.
int64_t residual_width(const GPTConfig& c) { return c.attention.kv_head_count() * c.attention.v_rank; }
// The MLP's first Linear: ffn outputs, twice that for the SwiGLU gate and up projections.
int64_t mlp_inner_width(const GPTConfig& c) { return (c.mlp == MlpKind::swiglu ? 2 : 1) * c.ffn_width(); }
int64_t norm_parameters(const GPTConfig& c) { return (c.norm == NormKind::rms ? 1 : 2) * c.d_model(); }
}  // namespace

int64_t gpt_attention_parameter_count(const GPTConfig& c) {
  const int64_t d = c.d_model(), b = c.attention.bias ? 1 : 0;
  // Projections, the residual's A and B [Hk, r, dh], and W_o, with biases where the model has them.
  return (projection_width(c) + residual_width(c)) * (d + b) + residual_width(c) * c.attention.head_dim() +
         c.attention.query_width() * d + b * d;
}

int64_t gpt_parameter_count(const GPTConfig& c) {
  const int64_t d = c.d_model(), f = c.ffn_width(), mb = c.mlp_bias ? 1 : 0;
  const int64_t mlp = mlp_inner_width(c) * (d + mb) + d * (f + mb);
  const int64_t layer = 2 * norm_parameters(c) + gpt_attention_parameter_count(c) + mlp;
  const int64_t embeddings = c.vocab * d * (c.tied_head ? 1 : 2) + (c.learned_positions() ? c.context * d : 0);
  return embeddings + c.layers * layer + norm_parameters(c);
}

GPTMacs gpt_macs(const GPTConfig& c, int64_t n) {
  const int64_t d = c.d_model(), L = c.layers, q = c.attention.query_width();
  GPTMacs m;
  // With the low-rank residual also X A and (X A) B, as the training forward computes V.
  m.projections = L * n * (d * (projection_width(c) + residual_width(c)) + residual_width(c) * c.attention.head_dim());
  m.attention = L * 2 * n * n * q;
  m.output = L * n * q * d;
  m.mlp = L * n * d * (mlp_inner_width(c) + c.ffn_width());
  m.head = n * d * c.vocab;
  return m;
}

namespace {
GPTConfig checked(GPTConfig c) {
  c.attention.causal = true;
  c.validate();
  return c;
}

// N(0, std) weights and embeddings, zero biases, as the official code initializes them.
void init_gpt_weights(Module& m, double std, Generator* gen) {
  NoGradGuard no_grad;
  for (auto& [name, p] : m.named_parameters()) {
    const size_t last = name.rfind('.');
    const size_t owner = name.rfind('.', last - 1) + 1;  // npos + 1 == 0 for a top-level module
    if (name.compare(owner, 2, "ln") == 0) continue;     // norms keep weight 1, bias 0
    const bool is_bias = name.compare(last, std::string::npos, ".bias") == 0;
    if (is_bias) p.copy_(zeros(p.shape(), p.device()));
    else p.copy_(init_normal(p.shape(), std, p.device(), gen));
  }
}
}  // namespace

GPTBlock::GPTBlock(const GPTConfig& c, Generator* gen)
    : ln1(c.d_model(), c.norm_eps, true, c.norm),
      attn(c.attention, gen),
      ln2(c.d_model(), c.norm_eps, true, c.norm),
      fc(c.d_model(), mlp_inner_width(c), c.mlp_bias, gen),
      proj(c.ffn_width(), c.d_model(), c.mlp_bias, gen),
      drop(c.dropout, gen),
      activation_(c.activation),
      mlp_kind_(c.mlp) {
  register_module("ln1", &ln1);
  register_module("attn", &attn);
  register_module("ln2", &ln2);
  register_module("fc", &fc);
  register_module("proj", &proj);
  register_module("drop", &drop);
}

Tensor GPTBlock::mlp(const Tensor& x) const {
  const Tensor h = fc.forward(x);
  return proj.forward(mlp_kind_ == MlpKind::swiglu ? swiglu(h) : activate(h, activation_));
}

AddNorm GPTBlock::forward(const Tensor& x, const Tensor& n, const LayerNorm& next) const {
  const AddNorm h = drop.add_norm(x, attn.forward(n), ln2);  // h = x + drop(attn(ln1(x))), ln2(h)
  return drop.add_norm(h.sum, mlp(h.normed), next);
}

Tensor GPTBlock::forward(const Tensor& x) const {
  const AddNorm h = drop.add_norm(x, attn.forward(ln1.forward(x)), ln2);
  return h.sum + drop.forward(mlp(h.normed));
}

Tensor GPTBlock::forward_cached(const Tensor& x, KVCache& cache, int64_t layer) const {
  Tensor h = x + attn.forward_cached(ln1.forward(x), cache, layer);
  return h + mlp(ln2.forward(h));
}

Tensor GPTBlock::decode_step(const Tensor& x, KVCache& cache, int64_t layer, const Tensor& start) const {
  Tensor h = x + attn.decode_step(ln1.forward(x), cache, layer, start);
  return h + mlp(ln2.forward(h));
}

GPT::GPT(const GPTConfig& config, Generator* gen)
    : wte(config.vocab, config.attention.d_model, gen),
      ln_f(config.attention.d_model, config.norm_eps, true, config.norm),
      config_(checked(config)) {
  register_module("wte", &wte);
  if (config_.learned_positions()) {
    wpe = std::make_unique<Embedding>(config_.context, config_.d_model(), gen);
    register_module("wpe", wpe.get());
  }
  for (int64_t i = 0; i < config_.layers; ++i) {
    blocks.push_back(std::make_unique<GPTBlock>(config_, gen));
    register_module("blocks." + std::to_string(i), blocks.back().get());
  }
  register_module("ln_f", &ln_f);
  if (!config_.tied_head) {
    lm_head = std::make_unique<Linear>(config_.d_model(), config_.vocab, false, gen);
    register_module("lm_head", lm_head.get());
  }
  init_gpt_weights(*this, config_.init_std, gen);
}

Tensor GPT::embed(const Tensor& ids, int64_t start) const {
  check<ShapeError>(ids.dim() == 2, "gpt: expected token ids [batch, len], got ", shape_str(ids.shape()));
  const int64_t T = ids.size(1);
  check<ValueError>(start + T <= config_.context, "gpt: positions ", start, "..", start + T - 1,
                    " exceed the model's context of ", config_.context, " tokens");
  if (!wpe) return wte.forward(ids);  // rotary positions: placed by the attention
  Tensor pos = arange(double(start), double(start + T), 1.0, TensorOptions(DType::i64, ids.device()));
  return wte.forward(ids) + wpe->forward(pos);  // [B, T, d] + [T, d]
}

Tensor GPT::logits(const Tensor& normed) const {
  // One GEMM over all positions: the embedding's gradient is then one [V, d] product, not a
  // per-sequence batch of them summed afterwards.
  Shape out = normed.shape();
  out.back() = config_.vocab;
  const Tensor& head = lm_head ? lm_head->weight : wte.weight;
  return matmul(normed.reshape({-1, config_.d_model()}), head, false, true).reshape(out);
}

Tensor GPT::forward(const Tensor& ids) const {
  AddNorm x{embed(ids, 0), Tensor()};
  x.normed = blocks.empty() ? ln_f.forward(x.sum) : blocks[0]->ln1.forward(x.sum);
  for (size_t l = 0; l < blocks.size(); ++l)
    x = blocks[l]->forward(x.sum, x.normed, l + 1 < blocks.size() ? blocks[l + 1]->ln1 : ln_f);
  return logits(x.normed);
}

Tensor GPT::loss(const Tensor& ids, const Tensor& targets) const {
  Tensor logits = forward(ids);
  return cross_entropy(logits.reshape({-1, config_.vocab}), targets.reshape({-1}));
}

KVCache GPT::make_cache(int64_t batch, int64_t capacity, DType dtype) const {
  const int64_t rows = capacity > 0 ? capacity : config_.context;
  prepare_rotary(rows);  // now, not in a step a CUDA graph may be capturing
  return KVCache(config_.attention, config_.layers, batch, rows, dtype, wte.weight.device());
}

void GPT::prepare_rotary(int64_t positions) const {
  if (!config_.attention.rope) return;
  for (const auto& b : blocks) b->attn.rotary(positions, wte.weight.device());
}

Tensor GPT::forward_cached(const Tensor& ids, KVCache& cache) const {
  check<ShapeError>(ids.dim() == 2 && ids.size(0) == cache.batch(), "gpt: expected ids [", cache.batch(),
                    ", len] for a cache of ", cache.batch(), " sequences, got ", shape_str(ids.shape()));
  Tensor x = embed(ids, cache.length());
  for (size_t l = 0; l < blocks.size(); ++l) x = blocks[l]->forward_cached(x, cache, int64_t(l));
  cache.advance(ids.size(1));
  return logits(ln_f.forward(x));
}

Tensor GPT::decode_step(const Tensor& ids, const Tensor& positions, KVCache& cache) const {
  check<ShapeError>(ids.dim() == 2 && ids.size(0) == cache.batch(), "gpt: expected ids [", cache.batch(),
                    ", len] for a cache of ", cache.batch(), " sequences, got ", shape_str(ids.shape()));
  check<ShapeError>(positions.dim() == 1 && positions.size(0) == ids.size(1) && positions.dtype() == DType::i64,
                    "gpt: expected positions [", ids.size(1), "] int64 for ids ", shape_str(ids.shape()), ", got ",
                    dtype_name(positions.dtype()), " ", shape_str(positions.shape()));
  Tensor x = wpe ? wte.forward(ids) + wpe->forward(positions) : wte.forward(ids);  // [B, T, d] + [T, d]
  const Tensor start = positions.narrow(0, 0, 1);
  for (size_t l = 0; l < blocks.size(); ++l) x = blocks[l]->decode_step(x, cache, int64_t(l), start);
  return logits(ln_f.forward(x));
}

}  // namespace qkv::nn
