// The conversion of a QKV (or GQA) GPT to its K=V form (lab/infer/convert.h) on tiny models built
// here: where the exact answer is known — V a fixed invertible map of K in every head, or V equal
// to K — the converted model gives the source's logits; on a model without that structure the
// data-aware fit's error is at most the baselines'; and what cannot be converted is refused.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "autograd/grad_mode.h"
#include "lab/infer/convert.h"
#include "tests/support/error_checks.h"

using namespace qkv;
using experiment::ConvertMethod;

namespace {

nn::GPTConfig tiny(int64_t kv_heads = 0) {
  nn::GPTConfig c;
  c.vocab = 40;
  c.context = 12;
  c.layers = 2;
  c.dropout = 0;
  c.init_std = 0.3;  // large enough that attention is far from uniform
  c.attention.d_model = 16;
  c.attention.heads = 4;
  c.attention.kv_heads = kv_heads;
  return c;
}

// Random values in place of every bias and LayerNorm parameter (the init leaves them 0 and 1), so
// the biases' path through the conversion is exercised.
void randomize_biases(nn::GPT& m, Generator& gen) {
  NoGradGuard no_grad;
  for (auto& [name, p] : m.named_parameters())
    if (name.ends_with(".bias") || name.find(".ln") != std::string::npos || name.starts_with("ln_f"))
      p.copy_(p + randn(p.shape(), {}, &gen) * 0.2);
}

// Gives every KV head of every layer V = K M_h: W_v,h = M_h W_k,h and b_v,h = M_h b_k,h with an
// invertible M_h (identity + noise), or M_h = I when `identity`.
void tie_values_to_keys(nn::GPT& m, Generator& gen, bool identity) {
  NoGradGuard no_grad;
  const auto& a = m.config().attention;
  const int64_t dh = a.head_dim(), hk = a.kv_head_count(), d = a.d_model;
  for (auto& block : m.blocks) {
    nn::Linear& k = block->attn.projection(nn::Role::k);
    nn::Linear& v = block->attn.projection(nn::Role::v);
    const Tensor wk = k.weight.reshape({hk, dh, d}), bk = k.bias.reshape({hk, dh, 1});
    std::vector<float> eye(size_t(hk * dh * dh), 0.0f);
    for (int64_t h = 0; h < hk; ++h)
      for (int64_t i = 0; i < dh; ++i) eye[size_t((h * dh + i) * dh + i)] = 1;
    Tensor mh = from_vector(eye, {hk, dh, dh});
    if (!identity) mh = mh + randn({hk, dh, dh}, {}, &gen) * 0.4;
    v.weight.copy_(matmul(mh, wk).reshape({hk * dh, d}));
    v.bias.copy_(matmul(mh, bk).reshape({hk * dh}));
  }
}

std::vector<Tensor> token_batches(int64_t count, int64_t batch, int64_t len, int64_t vocab, uint64_t seed) {
  Generator gen(seed);
  std::vector<Tensor> out;
  for (int64_t i = 0; i < count; ++i) {
    std::vector<int64_t> ids;
    for (double u : rand({batch * len}, DType::f64, &gen).to_vector<double>())
      ids.push_back(int64_t(u * double(vocab)));
    out.push_back(from_vector(ids, {batch, len}));
  }
  return out;
}

// max |a - b| / max |a| over the logits of the same tokens.
double logit_gap(const nn::GPT& a, const nn::GPT& b, const Tensor& ids) {
  NoGradGuard no_grad;
  const std::vector<float> x = a.forward(ids).to_vector<float>(), y = b.forward(ids).to_vector<float>();
  double gap = 0, scale = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    gap = std::max(gap, double(std::abs(x[i] - y[i])));
    scale = std::max(scale, double(std::abs(x[i])));
  }
  return gap / scale;
}

}  // namespace

TEST_CASE("convert: svd recovers a model whose values are an invertible map of its keys exactly") {
  for (const int64_t kv_heads : {0, 2, 1}) {  // QKV, GQA-2, MQA
    CAPTURE(kv_heads);
    Generator gen(7);
    nn::GPT source(tiny(kv_heads), &gen);
    randomize_biases(source, gen);
    tie_values_to_keys(source, gen, /*identity=*/false);
    source.eval();
    const infer::Calibration cal = infer::calibrate(source, token_batches(4, 4, 12, 40, 1));
    CHECK(cal.tokens == 4 * 4 * 12);
    const infer::Conversion conv = infer::convert_to_shared_kv(source, ConvertMethod::svd, cal);
    const nn::AttentionConfig& t = conv.model->config().attention;
    CHECK(t.sharing == nn::Sharing::q_kv);
    CHECK(t.kv_heads == kv_heads);
    CHECK(conv.mean_error() < 1e-9);
    conv.model->eval();
    const Tensor ids = token_batches(1, 3, 12, 40, 99)[0];  // tokens the fit never saw
    CHECK(logit_gap(source, *conv.model, ids) < 1e-4);
    // copy-k ignores V's map, so it does not recover this model.
    const infer::Conversion copy = infer::convert_to_shared_kv(source, ConvertMethod::copy_k, cal);
    copy.model->eval();
    CHECK(logit_gap(source, *copy.model, ids) > 1e-3);
    CHECK(copy.mean_error() > 1e-3);
  }
}

TEST_CASE("convert: copy-k and average are exact when W_v equals W_k, with or without calibration") {
  Generator gen(3);
  nn::GPT source(tiny(2), &gen);
  randomize_biases(source, gen);
  tie_values_to_keys(source, gen, /*identity=*/true);
  source.eval();
  const Tensor ids = token_batches(1, 2, 12, 40, 5)[0];
  for (const ConvertMethod m : {ConvertMethod::copy_k, ConvertMethod::average}) {
    const infer::Conversion conv = infer::convert_to_shared_kv(source, m, {});
    CHECK(conv.layer_error.empty());
    CHECK(std::isnan(conv.mean_error()));
    conv.model->eval();
    CHECK(logit_gap(source, *conv.model, ids) < 1e-6);
    // W_kv is W_k itself; W_q and W_o are untouched.
    const nn::Attention& s = source.blocks[1]->attn;
    const nn::Attention& c = conv.model->blocks[1]->attn;
    CHECK(c.projection(nn::Role::v).weight.to_vector<float>() == s.projection(nn::Role::k).weight.to_vector<float>());
    CHECK(c.projection(nn::Role::q).weight.to_vector<float>() == s.projection(nn::Role::q).weight.to_vector<float>());
    CHECK(c.o.weight.to_vector<float>() == s.o.weight.to_vector<float>());
  }
}

TEST_CASE("convert: on a model without K=V structure, svd's error is at most average's and copy-k's") {
  Generator gen(11);
  nn::GPT source(tiny(), &gen);
  randomize_biases(source, gen);
  const infer::Calibration cal = infer::calibrate(source, token_batches(4, 4, 12, 40, 2));
  const auto svd = infer::convert_to_shared_kv(source, ConvertMethod::svd, cal);
  const auto avg = infer::convert_to_shared_kv(source, ConvertMethod::average, cal);
  const auto copy = infer::convert_to_shared_kv(source, ConvertMethod::copy_k, cal);
  REQUIRE(svd.layer_error.size() == 2);
  for (size_t l = 0; l < 2; ++l) {
    CAPTURE(l);
    CHECK(svd.layer_error[l] <= avg.layer_error[l] + 1e-12);
    CHECK(svd.layer_error[l] <= copy.layer_error[l] + 1e-12);
    CHECK(svd.layer_error[l] > 0.01);  // nothing to recover exactly: a real approximation
    CHECK(svd.layer_error[l] < 1);
  }
  CHECK(svd.mean_error() < 0.9 * std::min(avg.mean_error(), copy.mean_error()));
  // The converted model is a complete Q-K=V model: the K=V slot replaced k and v, nothing else.
  std::vector<std::string> names;
  for (const auto& [name, t] : svd.model->named_parameters()) names.push_back(name);
  CHECK(std::count(names.begin(), names.end(), "blocks.0.attn.kv.weight") == 1);
  CHECK(std::count(names.begin(), names.end(), "blocks.0.attn.k.weight") == 0);
  CHECK(svd.model->num_parameters() ==
        source.num_parameters() - 2 * (16 * 16 + 16));  // one d x d projection and bias per layer fewer
  CHECK(svd.model->wte.weight.to_vector<float>() == source.wte.weight.to_vector<float>());
}

TEST_CASE("convert: errors name what cannot be converted") {
  Generator gen(1);
  nn::GPTConfig shared = tiny();
  shared.attention.sharing = nn::Sharing::q_kv;
  nn::GPT already(shared, &gen);
  test::check_contains(test::error_of<ValueError>(
                           [&] { infer::convert_to_shared_kv(already, ConvertMethod::copy_k, {}); }),
                       {"Q-K=V", "QKV, GQA-g, MQA"});
  nn::GPTConfig qk = tiny();
  qk.attention.sharing = nn::Sharing::qk_v;
  nn::GPT tied_q(qk, &gen);
  test::check_contains(test::error_of<ValueError>([&] { infer::shared_kv_target(tied_q.config()); }), {"Q=K-V"});
  nn::GPTConfig linear = tiny();
  linear.attention.linear = true;
  test::check_contains(test::error_of<ValueError>([&] { infer::shared_kv_target(linear); }), {"QKV+linear", "softmax"});
  nn::GPT source(tiny(), &gen);
  test::check_contains(test::error_of<ValueError>([&] { infer::convert_to_shared_kv(source, ConvertMethod::svd, {}); }),
                       {"svd", "calibration"});
  test::check_contains(test::error_of<ValueError>([] { infer::parse_convert_method("pca", "--method"); }),
                       {"--method", "pca", "copy-k, average, svd"});
  CHECK(infer::parse_convert_method("copy-k", "--method") == ConvertMethod::copy_k);
}
