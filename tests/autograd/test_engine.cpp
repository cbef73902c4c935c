#include <doctest/doctest.h>

#include "autograd/autograd.h"
#include "autograd/profiler.h"

using namespace qkv;

namespace {
Tensor leaf(std::vector<float> v, Shape s) { return from_vector(v, s).set_requires_grad(); }
std::vector<float> values(const Tensor& t) { return t.to_vector<float>(); }
}  // namespace

TEST_CASE("backward from a scalar fills .grad of the leaves") {
  Tensor x = leaf({1, 2, 3}, {3});
  Tensor y = sum(x * x * 3.0);
  CHECK(y.requires_grad());
  CHECK_FALSE(y.is_leaf());
  y.backward();
  CHECK(values(x.grad()) == std::vector<float>{6, 12, 18});
}

TEST_CASE("gradients accumulate across backward calls until zero_grad") {
  Tensor x = leaf({1, -1}, {2});
  Tensor y = sum(x * 2.0);
  y.backward({}, /*retain_graph=*/true);
  y.backward();
  CHECK(values(x.grad()) == std::vector<float>{4, 4});
  x.zero_grad();
  CHECK_FALSE(x.grad().defined());
}

TEST_CASE("a freed graph refuses a second backward and says how to keep it") {
  Tensor x = leaf({1, 2}, {2});
  Tensor y = sum(exp(x));
  y.backward();
  CHECK_THROWS_WITH_AS(y.backward(), doctest::Contains("retain_graph"), AutogradError);
}

TEST_CASE("the graph is freed after backward unless retained") {
  const size_t n = 1 << 16, bytes = n * sizeof(float);
  for (bool retain : {false, true}) {
    Tensor x = leaf(std::vector<float>(n, 0.5f), {int64_t(n)});
    const size_t base = memory_stats(kCPU).current;
    Tensor y = sum(exp(x) * x);  // the graph keeps exp's output alive for both backward rules
    CHECK(memory_stats(kCPU).current >= base + bytes);
    y.backward({}, retain);
    const size_t held = memory_stats(kCPU).current - base;  // x.grad, plus exp(x) if retained
    CHECK(held >= (retain ? 2 : 1) * bytes);
    CHECK(held < (retain ? 2 : 1) * bytes + 4096);
  }
}

TEST_CASE("backward with an explicit gradient, and its errors") {
  Tensor x = leaf({1, 2, 3, 4}, {2, 2});
  Tensor y = x * x;
  CHECK_THROWS_WITH_AS(y.backward(), doctest::Contains("pass a gradient"), ShapeError);
  CHECK_THROWS_WITH_AS(y.backward(ones({3})), doctest::Contains("gradient shape [3]"), ShapeError);
  y.backward(from_vector<float>({1, 0, 0, 1}, {2, 2}));
  CHECK(values(x.grad()) == std::vector<float>{2, 0, 0, 8});
  CHECK_THROWS_WITH_AS(ones({1}).backward(), doctest::Contains("does not require grad"), AutogradError);
}

TEST_CASE("no_grad and detach stop the graph") {
  Tensor x = leaf({1, 2}, {2});
  {
    NoGradGuard ng;
    Tensor y = x * 2.0;
    CHECK_FALSE(y.requires_grad());
  }
  CHECK(grad_enabled());
  Tensor d = x.detach();
  CHECK_FALSE(d.requires_grad());
  CHECK(d.same_storage(x));
  Tensor y = sum(x * d);  // d is a constant: dy/dx = d
  y.backward();
  CHECK(values(x.grad()) == std::vector<float>{1, 2});
}

TEST_CASE("a tensor used twice receives the sum of both gradients") {
  Tensor x = leaf({3}, {1});
  Tensor a = x * x, b = x * 5.0;
  sum(a + b).backward();
  CHECK(values(x.grad()) == std::vector<float>{11});
}

TEST_CASE("a tied embedding and output weight gets the sum of both gradients") {
  // The embedding's rule adds its rows in place into the output layer's dense gradient when that
  // is pending already and nothing else holds it (GPT's tied weight), and otherwise into zeros.
  // Either way the tied weight's gradient must equal the gradients of two untied copies added up
  // (ids repeat), and a gradient the pending sum shares must not change.
  Generator gen(5);
  const Tensor w0 = randn({7, 4}, {}, &gen), x = randn({3, 4}, {}, &gen), u0 = randn({7, 4}, {}, &gen);
  const Tensor probe = randn({3, 7}, {}, &gen), probe2 = randn({3, 4}, {}, &gen), probe_u = randn({7, 4}, {}, &gen);
  const Tensor ids = from_vector<int64_t>({2, 5, 2}, {3});
  // chained: the output layer reads the embedding (backward reaches it first, as in a GPT);
  // branches: the two uses are separate branches of the loss; shared: the output layer's weight
  // is wo + u2, whose backward hands one gradient tensor to both wo and u2.
  for (const std::string mode : {"chained", "branches", "shared"}) {
    CAPTURE(mode);
    auto loss = [&](const Tensor& we, const Tensor& wo, const Tensor& u) {
      const Tensor e = embedding(we, ids);
      if (mode == "chained") return sum(linear(e, wo, Tensor()) * probe);
      if (mode == "branches") return sum(linear(x, wo, Tensor()) * probe) + sum(e * probe2);
      const Tensor u2 = u * 2.0;  // its node waits for both uses of u2: the sum stays shared meanwhile
      return sum(u2 * probe_u) + sum(linear(e, wo + u2, Tensor()) * probe);
    };
    Tensor tied = w0.detach().set_requires_grad(), u_tied = u0.detach().set_requires_grad();
    Tensor w_emb = w0.detach().set_requires_grad(), w_out = w0.detach().set_requires_grad();
    Tensor u = u0.detach().set_requires_grad();
    const Tensor tied_loss = loss(tied, tied, u_tied);
    autograd::set_profiling_enabled(true);
    autograd::reset_profile();
    tied_loss.backward();
    autograd::set_profiling_enabled(false);
    // The rows go in place, never through a copy of a [vocab, d] matrix (index_add); only where
    // the pending sum is shared does the engine add the two gradients afterwards.
    CHECK(autograd::profiled_calls("index_accumulate") == 1);
    CHECK(autograd::profiled_calls("index_add") == 0);
    if (mode == "chained") CHECK(autograd::profiled_calls("add") == 0);
    loss(w_emb, w_out, u).backward();
    const std::vector<float> got = values(tied.grad()), emb = values(w_emb.grad()), out = values(w_out.grad());
    REQUIRE(got.size() == emb.size());
    for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(emb[i] + out[i]).epsilon(1e-5));
    if (mode == "shared") CHECK(values(u_tied.grad()) == values(u.grad()));
  }
}

TEST_CASE("a linear adds its input gradient into the pending sum only when nothing else holds that sum") {
  // x feeds three linears (Q, K, V) and the residual: the second and third add dy w into the
  // sum the engine holds for x. z = x + u makes the add's backward hand one gradient to both x
  // and u; a fold into that shared tensor would corrupt u's gradient.
  Generator gen(9);
  const Tensor x0 = randn({40, 36}, {}, &gen), u0 = randn({40, 36}, {}, &gen);
  std::vector<Tensor> w, probe;
  for (int i = 0; i < 4; ++i) {
    w.push_back(randn({32, 36}, {}, &gen));
    probe.push_back(randn({40, 32}, {}, &gen));
  }
  const Tensor probe_r = randn({40, 36}, {}, &gen);
  for (const bool shared : {false, true}) {
    CAPTURE(shared);
    Tensor xl = x0.detach().set_requires_grad(), ul = u0.detach().set_requires_grad();
    const Tensor x = xl * 1.5, u = ul * 2.0;
    Tensor loss = sum((shared ? x + u : x) * probe_r) + sum(linear(u, w[3], Tensor()) * probe[3]);
    for (int i = 0; i < 3; ++i) loss = loss + sum(linear(x, w[size_t(i)], Tensor()) * probe[size_t(i)]);
    loss.backward();
    Tensor want_x = probe_r;
    for (int i = 0; i < 3; ++i) want_x = want_x + matmul(probe[size_t(i)], w[size_t(i)]);
    const Tensor want_u = (shared ? probe_r : zeros({40, 36})) + matmul(probe[3], w[3]);
    const std::vector<float> gx = values(xl.grad()), gu = values(ul.grad());
    const std::vector<float> wx = values(want_x * 1.5), wu = values(want_u * 2.0);
    for (size_t i = 0; i < gx.size(); ++i) CHECK(gx[i] == doctest::Approx(wx[i]).epsilon(1e-4));
    for (size_t i = 0; i < gu.size(); ++i) CHECK(gu[i] == doctest::Approx(wu[i]).epsilon(1e-4));
  }
}

TEST_CASE("gradients flow through views and conversions") {
  Tensor x = leaf({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor y = x.transpose(0, 1).reshape({6}).slice(0, 1, 6, 2) * from_vector<float>({10, 20, 30});
  // x^T flattened is [1,4,2,5,3,6]; elements 1,3,5 are x[1,0], x[1,1], x[1,2].
  sum(y).backward();
  CHECK(values(x.grad()) == std::vector<float>{0, 0, 0, 10, 20, 30});

  Tensor z = leaf({1, 2}, {2, 1});
  sum(z.expand({2, 3}).to(DType::f64) * 2.0).backward();
  CHECK(values(z.grad()) == std::vector<float>{6, 6});
  CHECK(z.grad().dtype() == DType::f32);

  Tensor w = leaf({1, 2, 3}, {3});
  sum(w.unsqueeze(0).select(0, 0).squeeze() * w).backward();
  CHECK(values(w.grad()) == std::vector<float>{2, 4, 6});
}

TEST_CASE("reaching an op without a backward rule is a clear error") {
  Tensor x = leaf({0.5f, -0.5f}, {2});
  Tensor g = gelu_backward(ones({2}), x);
  CHECK(g.requires_grad());
  CHECK_THROWS_WITH_AS(sum(g).backward(), doctest::Contains("'gelu_backward', which is not differentiable"),
                       AutogradError);
}

TEST_CASE("integer results and comparisons carry no gradient") {
  Tensor x = leaf({1, 5, 3}, {3});
  CHECK_FALSE(gt(x, zeros({3})).requires_grad());
  CHECK_FALSE(argmax(x, 0).requires_grad());
  auto [v, i] = max(x, 0);
  CHECK(v.requires_grad());
  CHECK_FALSE(i.requires_grad());
  v.backward();
  CHECK(values(x.grad()) == std::vector<float>{0, 1, 0});
}

TEST_CASE("in-place writes are refused where they would corrupt gradients") {
  Tensor x = leaf({1, 2}, {2});
  CHECK_THROWS_WITH_AS(x.fill_(0), doctest::Contains("NoGradGuard"), AutogradError);
  Tensor h = x * 1.0;     // a non-leaf
  Tensor y = sum(h * h);  // saves h
  {
    NoGradGuard ng;
    h.fill_(5);
  }
  CHECK_THROWS_WITH_AS(y.backward(), doctest::Contains("modified in place"), AutogradError);
  CHECK_THROWS_WITH_AS(ones({2}, DType::i64).set_requires_grad(), doctest::Contains("only floating"), DTypeError);
  CHECK_THROWS_WITH_AS((x * 2.0).set_requires_grad(false), doctest::Contains("only leaf tensors"), AutogradError);
}

TEST_CASE("optimizer-style updates under no_grad keep the leaf usable") {
  Tensor w = leaf({1, 1}, {2});
  for (int step = 0; step < 3; ++step) {
    Tensor loss = sum(w * w);
    w.zero_grad();
    loss.backward();
    NoGradGuard ng;
    w.copy_(w - w.grad() * 0.25);
  }
  CHECK(values(w) == std::vector<float>{0.125f, 0.125f});
  CHECK(w.requires_grad());
  CHECK(w.is_leaf());
}

TEST_CASE("relu_dropout equals dropout after relu, values and gradients, and keeps only its output") {
  // Its backward reads where the output is positive: the input must not be held, and no random
  // numbers are drawn again.
  Generator gen(11);
  Tensor a = leaf({1, -2, 3, 0.5f, 2, -1, 0.25f, -0.75f, 4, -3, 1.5f, -0.5f}, {3, 4});
  Tensor h = a * 2.0;  // mul saves a, not h: the fused op is h's only possible keeper
  const std::weak_ptr<Storage> h_storage = h.storage();
  Tensor y = relu_dropout(h, 0.3, true, &gen);
  h = Tensor();
  CHECK(h_storage.expired());
  sum(y * y).backward();

  Generator gen2(11);
  Tensor a2 = leaf(values(a), {3, 4});
  Tensor y2 = dropout(relu(a2 * 2.0), 0.3, true, &gen2);
  sum(y2 * y2).backward();
  CHECK(values(y) == values(y2));
  CHECK(values(a.grad()) == values(a2.grad()));
  CHECK(gen.state().offset == gen2.state().offset);  // the same numbers reserved
  CHECK(values(relu_dropout(a2, 0.3, /*training=*/false, &gen2)) == values(relu(a2)));
}

TEST_CASE("the fused residual layer norm keeps neither summand for its backward") {
  // Its backward reads the sum, the statistics and the weight: holding the branch output y
  // would cost one more [B, T, d] per residual add than the unfused graph. Its gradients equal
  // the unfused graph's whether the loss reads the sum too (pre-norm) or only the normed rows
  // (post-norm: no gradient reaches the sum).
  for (const bool use_sum : {true, false}) {
    CAPTURE(use_sum);
    Generator gen(7);
    Tensor a = leaf({1, -2, 3, 0.5f, 2, -1}, {2, 3}), x = leaf({0.1f, 0.2f, -0.3f, 1, 0, -1}, {2, 3});
    Tensor w = leaf({1, 0.5f, 2}, {3}), b = leaf({0, 0.1f, -0.1f}, {3});
    Tensor y = a * 3.0;  // mul saves a, not y: the fused op is y's only keeper
    const std::weak_ptr<Storage> y_storage = y.storage();
    AddNorm r = dropout_add_layer_norm(x, y, w, b, 0.25, true, &gen);
    y = Tensor();
    CHECK(y_storage.expired());
    (use_sum ? sum(r.normed * r.normed + r.sum) : sum(r.normed * r.normed)).backward();

    // The same through the unfused ops, with the generator's draws repeated.
    Tensor a2 = leaf(values(a), {2, 3}), x2 = leaf(values(x), {2, 3}), w2 = leaf(values(w), {3}),
           b2 = leaf(values(b), {3});
    Generator gen2(7);
    Tensor s2 = x2 + dropout(a2 * 3.0, 0.25, true, &gen2);
    Tensor n2 = layer_norm(s2, w2, b2);
    (use_sum ? sum(n2 * n2 + s2) : sum(n2 * n2)).backward();
    for (auto [g, g2] : {std::pair{a, a2}, {x, x2}, {w, w2}, {b, b2}}) {
      const std::vector<float> u = values(g.grad()), v = values(g2.grad());
      REQUIRE(u.size() == v.size());
      for (size_t k = 0; k < u.size(); ++k) CHECK(u[k] == doctest::Approx(v[k]).epsilon(1e-5));
    }
  }
}
