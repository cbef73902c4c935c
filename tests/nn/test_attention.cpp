// The study's claims about the attention variants, as properties of nn::Attention, and the
// fused attention op against the same computation composed from primitive ops.
#include <doctest/doctest.h>

#include <omp.h>

#include <cmath>

#include "nn/attention.h"

using namespace qkv;
using namespace qkv::nn;

namespace {

AttentionConfig config(Sharing s, int64_t pos2d = 0, int64_t kv_heads = 0, bool causal = false) {
  AttentionConfig c;
  c.d_model = 16;
  c.heads = 4;
  c.kv_heads = kv_heads;
  c.sharing = s;
  c.pos2d = pos2d;
  c.causal = causal;
  return c;
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  return amax(abs(a.to(DType::f64) - b.to(DType::f64))).item<double>();
}

void copy_linear(Linear& dst, const Linear& src) {
  NoGradGuard ng;
  dst.weight.copy_(src.weight);
  dst.bias.copy_(src.bias);
}

// softmax(scale q k^T + bias, bottom-right causal mask) v from primitive ops, KV heads repeated.
Tensor composed_attention(const Tensor& q, Tensor k, Tensor v, const Tensor& bias, bool causal) {
  const int64_t H = q.size(1), Hk = k.size(1), T = q.size(2), S = k.size(2);
  if (Hk != H) {
    k = k.unsqueeze(2).expand({k.size(0), Hk, H / Hk, S, k.size(3)}).reshape({k.size(0), H, S, k.size(3)});
    v = v.unsqueeze(2).expand({v.size(0), Hk, H / Hk, S, v.size(3)}).reshape({v.size(0), H, S, v.size(3)});
  }
  Tensor s = matmul(q, k, false, true) * (1.0 / std::sqrt(double(q.size(3))));
  if (bias.defined()) s = s + bias;
  if (causal) {
    std::vector<uint8_t> m(static_cast<size_t>(T * S));
    for (int64_t i = 0; i < T; ++i)
      for (int64_t j = 0; j < S; ++j) m[size_t(i * S + j)] = j > i + S - T;
    s = masked_fill(s, from_vector(m, {T, S}).to(DType::b8), -INFINITY);
  }
  return matmul(softmax(s, -1), v);
}

}  // namespace

TEST_CASE("Q=K raw scores are symmetric before masking, and the 2D scores break the symmetry") {
  Tensor x = randn({2, 7, 16});
  for (Sharing s : {Sharing::qk_v, Sharing::all}) {
    Attention plain(config(s));
    Tensor sc = plain.scores(x);
    CHECK(max_abs_diff(sc, sc.transpose(-1, -2)) < 1e-5);
    Attention plus(config(s, /*pos2d=*/10));
    Tensor sp = plus.scores(x);
    CHECK(max_abs_diff(sp, sp.transpose(-1, -2)) > 1e-3);
  }
  for (Sharing s : {Sharing::qkv, Sharing::q_kv}) {
    Attention a(config(s));
    Tensor sc = a.scores(x);
    CHECK(max_abs_diff(sc, sc.transpose(-1, -2)) > 1e-3);
  }
}

TEST_CASE("tied roles are the same tensor, not a copy") {
  Tensor x = randn({1, 5, 16});
  Attention qk(config(Sharing::qk_v));
  auto h = qk.project(x);
  CHECK(h.q.impl_ptr() == h.k.impl_ptr());
  CHECK(h.v.impl_ptr() != h.k.impl_ptr());
  Attention kv(config(Sharing::q_kv));
  h = kv.project(x);
  CHECK(h.k.impl_ptr() == h.v.impl_ptr());
  Attention all(config(Sharing::all));
  h = all.project(x);
  CHECK((h.q.impl_ptr() == h.k.impl_ptr() && h.k.impl_ptr() == h.v.impl_ptr()));
  CHECK(all.named_parameters().size() == 4);  // qkv.weight, qkv.bias, o.weight, o.bias
}

TEST_CASE("Q-K=V equals QKV when W_v is set to W_k") {
  Tensor x = randn({2, 6, 16});
  for (int64_t kv_heads : {0, 2}) {
    Attention full(config(Sharing::qkv, 0, kv_heads)), shared(config(Sharing::q_kv, 0, kv_heads));
    copy_linear(full.projection(Role::v), full.projection(Role::k));
    copy_linear(shared.projection(Role::q), full.projection(Role::q));
    copy_linear(shared.projection(Role::k), full.projection(Role::k));
    copy_linear(shared.o, full.o);
    CHECK(max_abs_diff(full.forward(x), shared.forward(x)) < 1e-6);
  }
}

TEST_CASE("GQA equals MHA whose K/V heads are the group's heads repeated") {
  Tensor x = randn({2, 5, 16});
  Attention gqa(config(Sharing::qkv, 0, /*kv_heads=*/2)), mha(config(Sharing::qkv));
  CHECK(gqa.projection(Role::k).weight.shape() == Shape{8, 16});
  copy_linear(mha.projection(Role::q), gqa.projection(Role::q));
  copy_linear(mha.o, gqa.o);
  // MHA head h reads GQA KV head h / 2: rows [4h/2 .. ) of the KV projections, repeated.
  NoGradGuard ng;
  for (Role r : {Role::k, Role::v})
    for (int64_t h = 0; h < 4; ++h) {
      Linear &dst = mha.projection(r), &src = gqa.projection(r);
      dst.weight.narrow(0, 4 * h, 4).copy_(src.weight.narrow(0, 4 * (h / 2), 4));
      dst.bias.narrow(0, 4 * h, 4).copy_(src.bias.narrow(0, 4 * (h / 2), 4));
    }
  CHECK(max_abs_diff(gqa.forward(x), mha.forward(x)) < 1e-6);
  Attention same(config(Sharing::qkv, 0, /*kv_heads=*/4));
  CHECK(same.num_parameters() == mha.num_parameters());
}

TEST_CASE("parameter counts follow the closed forms (d = 1024, 16 heads, biases)") {
  const int64_t d = 1024;
  auto count = [&](Sharing s, int64_t kv_heads = 0) {
    AttentionConfig c;
    c.d_model = d;
    c.heads = 16;
    c.kv_heads = kv_heads;
    c.sharing = s;
    return Attention(c).num_parameters();
  };
  CHECK(count(Sharing::qkv) == 4 * d * d + 4 * d);
  CHECK(count(Sharing::qk_v) == 3 * d * d + 3 * d);
  CHECK(count(Sharing::q_kv) == 3 * d * d + 3 * d);
  CHECK(count(Sharing::all) == 2 * d * d + 2 * d);
  const int64_t dkv = 4 * 64;  // GQA-4: 4 KV heads of 64
  CHECK(count(Sharing::qkv, 4) == 2 * (d * d + d) + 2 * (d * dkv + dkv));
  CHECK(count(Sharing::q_kv, 1) == 2 * (d * d + d) + (d * 64 + 64));
}

TEST_CASE("bad variant combinations are rejected with the reason") {
  CHECK_THROWS_WITH_AS(Attention(config(Sharing::qk_v, 0, 2)), doctest::Contains("ties K to Q"), ValueError);
  CHECK_THROWS_WITH_AS(Attention(config(Sharing::qkv, 0, 3)), doctest::Contains("cannot be grouped"), ValueError);
  CHECK_THROWS_WITH_AS(Attention(config(Sharing::qkv, 10, 0, true)), doctest::Contains("non-causal"), ValueError);
  CHECK_THROWS_WITH_AS(Attention(config(Sharing::qv_k, 0, 2)), doctest::Contains("ties V to Q"), ValueError);
  CHECK_THROWS_WITH_AS(parse_sharing("QK=V"), doctest::Contains("Q=K-V (qk), Q-K=V (kv), Q=K=V (k)"), ValueError);
  CHECK(parse_sharing("kv") == Sharing::q_kv);
  CHECK(parse_sharing("k") == Sharing::all);
}

TEST_CASE("the fused attention op equals the composed computation, values and gradients") {
  struct Case {
    int64_t B, H, Hk, T, S, D;
    bool causal, bias;
  };
  for (const Case& c : {Case{2, 4, 4, 9, 9, 8, false, false}, Case{1, 4, 2, 130, 130, 8, true, true},
                        Case{2, 2, 1, 3, 70, 4, true, false}, Case{1, 2, 2, 100, 100, 16, false, true}}) {
    CAPTURE(c.T);
    Tensor q = randn({c.B, c.H, c.T, c.D}).set_requires_grad();
    Tensor k = randn({c.B, c.Hk, c.S, c.D}).set_requires_grad();
    Tensor v = randn({c.B, c.Hk, c.S, c.D}).set_requires_grad();
    Tensor bias = c.bias ? randn({c.T, c.S}).set_requires_grad() : Tensor();
    Tensor w = randn({c.B, c.H, c.T, c.D});
    Tensor fused = attention(q, k, v, bias, c.causal);
    sum(fused * w).backward();
    std::vector<Tensor> g_fused = {q.grad(), k.grad(), v.grad()};
    if (c.bias) g_fused.push_back(bias.grad());
    for (Tensor* t : {&q, &k, &v, &bias})
      if (t->defined()) t->zero_grad();
    Tensor composed = composed_attention(q, k, v, bias, c.causal);
    sum(composed * w).backward();
    CHECK(max_abs_diff(fused, composed) < 1e-5);
    CHECK(max_abs_diff(g_fused[0], q.grad()) < 1e-4);
    CHECK(max_abs_diff(g_fused[1], k.grad()) < 1e-4);
    CHECK(max_abs_diff(g_fused[2], v.grad()) < 1e-4);
    if (c.bias) CHECK(max_abs_diff(g_fused[3], bias.grad()) < 1e-4);
  }
}

TEST_CASE("the fused attention's gradients are the same bits whatever the thread count") {
  // The bias gradient sums over every (batch, KV head): a fixed partition keeps the sum's
  // grouping, so a seed gives the same run on 1 thread or many, and run after run.
  Generator gen(7);
  Tensor q = randn({8, 4, 32, 16}, {}, &gen), k = randn({8, 2, 32, 16}, {}, &gen), v = randn({8, 2, 32, 16}, {}, &gen);
  Tensor bias = randn({32, 32}, {}, &gen), w = randn({8, 4, 32, 16}, {}, &gen);
  const int threads = omp_get_max_threads();
  std::vector<std::vector<float>> runs;
  for (int n : {1, threads, threads, 3}) {
    omp_set_num_threads(n);
    Tensor qq = q.detach().set_requires_grad(), kk = k.detach().set_requires_grad(),
           vv = v.detach().set_requires_grad(), bb = bias.detach().set_requires_grad();
    sum(attention(qq, kk, vv, bb, false) * w).backward();
    std::vector<float> all;
    for (const Tensor* t : {&qq, &kk, &vv, &bb}) {
      const std::vector<float> g = t->grad().to_vector<float>();
      all.insert(all.end(), g.begin(), g.end());
    }
    runs.push_back(all);
  }
  omp_set_num_threads(threads);
  for (size_t i = 1; i < runs.size(); ++i) CHECK(runs[i] == runs[0]);
}

TEST_CASE("attention over heads split from projections keeps their layout: heads merge back as views") {
  // q, k, v as the model makes them: [B, T, H * D] rows viewed as [B, H, T, D]. The output and
  // the gradients are stored the same way, so neither the merge nor the split's backward copies,
  // and the values are those of attention on row-major heads.
  const int64_t B = 2, T = 70, H = 4, D = 8;
  Generator gen(3);
  auto heads = [&](const Tensor& rows) { return rows.reshape({B, T, H, D}).permute({0, 2, 1, 3}); };
  Tensor x[3], w = randn({B, H, T, D}, {}, &gen);
  for (Tensor& t : x) t = randn({B, T, H * D}, {}, &gen).set_requires_grad();
  Tensor y = attention(heads(x[0]), heads(x[1]), heads(x[2]), Tensor(), /*causal=*/true);
  CHECK(y.permute({0, 2, 1, 3}).is_contiguous());
  sum(y * w).backward();

  Tensor r[3];
  for (int i = 0; i < 3; ++i) r[i] = heads(x[i].detach()).contiguous().set_requires_grad();
  Tensor y2 = attention(r[0], r[1], r[2], Tensor(), true);
  CHECK(y2.is_contiguous());
  sum(y2 * w).backward();
  CHECK(max_abs_diff(y, y2) == 0);
  for (int i = 0; i < 3; ++i) {
    CHECK(x[i].grad().is_contiguous());
    CHECK(max_abs_diff(heads(x[i].grad()), r[i].grad()) == 0);
  }
}

TEST_CASE("k and v may be the same tensor whose gradient is the sum of both roles") {
  Tensor q = randn({1, 2, 6, 4}).set_requires_grad();
  Tensor kv = randn({1, 2, 6, 4}).set_requires_grad();
  sum(attention(q, kv, kv)).backward();
  Tensor shared = kv.grad();
  Tensor k2 = kv.detach().clone().set_requires_grad(), v2 = kv.detach().clone().set_requires_grad();
  sum(attention(q.detach(), k2, v2)).backward();
  CHECK(max_abs_diff(shared, k2.grad() + v2.grad()) < 1e-6);
}

TEST_CASE("attention modules train: gradients reach every projection and the 2D score weights") {
  Tensor x = randn({2, 5, 16});
  for (Sharing s : {Sharing::qkv, Sharing::qk_v, Sharing::q_kv, Sharing::all}) {
    Attention a(config(s, s == Sharing::qkv ? 0 : 10));
    sum(a.forward(x)).backward();
    for (auto& [name, p] : a.named_parameters()) {
      CAPTURE(name);
      REQUIRE(p.grad().defined());
      CHECK(amax(abs(p.grad())).item<float>() > 0);
    }
  }
}
