#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>

#include "nn/layers.h"
#include "nn/position.h"

using namespace qkv;
using namespace qkv::nn;

namespace {
struct Tiny : Module {
  Linear a{3, 4}, b{4, 2, /*bias=*/false};
  LayerNorm norm{4};
  Tiny() {
    register_module("a", &a);
    register_module("norm", &norm);
    register_module("b", &b);
  }
  Tensor forward(const Tensor& x) const { return b.forward(norm.forward(a.forward(x))); }
};
}  // namespace

TEST_CASE("parameters are named hierarchically in PyTorch's layout") {
  Tiny m;
  std::vector<std::string> names;
  for (auto& [n, t] : m.named_parameters()) names.push_back(n);
  CHECK(names == std::vector<std::string>{"a.weight", "a.bias", "norm.weight", "norm.bias", "b.weight"});
  CHECK(m.a.weight.shape() == Shape{4, 3});  // [out, in]
  CHECK(m.num_parameters() == 12 + 4 + 4 + 4 + 8);
  for (const Tensor& p : m.parameters()) CHECK(p.requires_grad());
}

TEST_CASE("state dicts round-trip through safetensors, and mismatches are named") {
  Tiny m1, m2;
  const std::string path = (std::filesystem::temp_directory_path() / "qkvlab-tiny.safetensors").string();
  m1.save(path);
  m2.load(path);
  Tensor x = randn({5, 3});
  CHECK(amax(abs(m1.forward(x) - m2.forward(x))).item<float>() == 0.0f);
  std::map<std::string, Tensor> state;
  for (auto& [n, t] : m1.state_dict()) state[n] = t;
  state.erase("b.weight");
  CHECK_THROWS_WITH_AS(m2.load_state_dict(state), doctest::Contains("'b.weight' is missing"), ValueError);
  state["b.weight"] = zeros({3, 3});
  CHECK_THROWS_WITH_AS(m2.load_state_dict(state), doctest::Contains("'b.weight' has shape [3, 3]"), ShapeError);
  state["b.weight"] = zeros({2, 4});
  state["extra"] = zeros({1});
  CHECK_THROWS_WITH_AS(m2.load_state_dict(state), doctest::Contains("unexpected parameter 'extra'"), ValueError);
  m2.load_state_dict(state, /*strict=*/false);
  CHECK(amax(abs(m2.b.weight)).item<float>() == 0.0f);
  std::filesystem::remove(path);
}

TEST_CASE("Linear applies to any leading dims and matches x W^T + b") {
  Linear l(3, 2);
  Tensor x = randn({2, 4, 3});
  Tensor y = l.forward(x);
  CHECK(y.shape() == Shape{2, 4, 2});
  Tensor ref = matmul(x.reshape({8, 3}), l.weight.transpose(0, 1)) + l.bias;
  CHECK(amax(abs(y.reshape({8, 2}) - ref)).item<float>() < 1e-6);
  CHECK_THROWS_WITH_AS(l.forward(randn({2, 4})), doctest::Contains("expected input [..., 3]"), ShapeError);
}

TEST_CASE("dropout is active only in training mode") {
  Dropout d(0.5);
  Tensor x = ones({1000});
  Tensor y = d.forward(x);
  const float zeros_frac = mean(cast(eq(y, zeros({1})), DType::f32)).item<float>();
  CHECK(zeros_frac == doctest::Approx(0.5).epsilon(0.1));
  d.eval();
  CHECK(amax(abs(d.forward(x) - x)).item<float>() == 0.0f);
}

TEST_CASE("sinusoidal tables") {
  Tensor pe = sinusoidal_table(50, 8);
  CHECK(pe.shape() == Shape{50, 8});
  std::vector<float> v = pe.to_vector<float>();
  CHECK(v[0] == 0.0f);  // sin(0)
  CHECK(v[1] == 1.0f);  // cos(0)
  CHECK(v[8 * 3 + 2] == doctest::Approx(std::sin(3 * std::pow(10000.0, -2.0 / 8))));
  Tensor p = pos2d_table(4, 10);
  CHECK(p.shape() == Shape{4, 4, 10});
  std::vector<float> pv = p.to_vector<float>();
  auto at = [&](int i, int j, int c) { return pv[size_t((i * 4 + j) * 10 + c)]; };
  CHECK(at(1, 3, 0) == doctest::Approx(std::sin(1.0)));  // first half: position i
  CHECK(at(1, 3, 5) == doctest::Approx(std::sin(3.0)));  // second half: position j
  CHECK(at(1, 3, 0) != at(3, 1, 0));
  CHECK_THROWS_AS(pos2d_table(4, 5), ValueError);
}

TEST_CASE("module: to(dtype) rounds every floating parameter, keeps requires_grad, refuses an integer dtype") {
  Tiny m;
  const std::vector<double> before = m.a.weight.to_vector<double>();
  m.to(DType::bf16);
  for (const Tensor& p : m.parameters()) {
    CHECK(p.dtype() == DType::bf16);
    CHECK(p.requires_grad());
  }
  const std::vector<double> after = m.a.weight.to_vector<double>();
  REQUIRE(after.size() == before.size());
  for (size_t i = 0; i < after.size(); ++i) CHECK(after[i] == doctest::Approx(before[i]).epsilon(1.0 / 256));
  CHECK(after != before);  // rounded, not kept
  CHECK_THROWS_WITH_AS(m.to(DType::i64), doctest::Contains("not a floating dtype"), DTypeError);
}

TEST_CASE("module: loading a tensor of another dtype is refused, not silently cast") {
  Linear a(3, 2), b(3, 2);
  std::map<std::string, Tensor> state;
  for (const auto& [name, t] : a.state_dict()) state.emplace(name, t);
  state.at("weight") = state.at("weight").to(DType::f64);
  CHECK_THROWS_WITH_AS(b.load_state_dict(state), doctest::Contains("'weight' is float64 but the model's is float32"),
                       DTypeError);
}
