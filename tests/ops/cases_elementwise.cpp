// Test cases for the elementwise ops: broadcasting shapes, size-1 dims, 0-dim operands.
#include "tests/ops/references.h"

namespace qkv::test {
namespace {

// Shapes every binary op is tried on: equal, trailing broadcast, both-sided, scalar, size-1.
std::vector<Sample> binary_samples(bool away_from_zero_b = false) {
  auto b = [&](Shape s) { return away_from_zero_b ? away0(std::move(s)) : real(std::move(s)); };
  return {{"same shape", {real({3, 4}), b({3, 4})}},
          {"broadcast row", {real({2, 3, 4}), b({4})}},
          {"broadcast both", {real({2, 1, 4}), b({3, 1})}},
          {"0-dim operand", {real({}), b({2, 3})}},
          {"size-1 dims", {real({1, 5, 1}), b({1, 5, 1})}},
          // The CUDA vector path: contiguous with a scalar tail, and a row broadcast (bias add).
          {"contiguous", {real({1027, 37}), b({1027, 37})}, NoAttrs{}, false},
          {"bias row", {real({257, 64}), b({64})}, NoAttrs{}, false}};
}

template <class F> OpCase binary_case(F f, bool away_from_zero_b = false) {
  OpCase c;
  c.samples = binary_samples(away_from_zero_b);
  c.reference = [f](const std::vector<Ref>& in, const Attrs&) { return std::vector<Ref>{map2(in[0], in[1], f)}; };
  return c;
}

template <class F> OpCase unary_case(F f, Kind kind = Kind::real, Attrs attrs = NoAttrs{}) {
  OpCase c;
  auto spec = [kind](Shape s) {
    InputSpec i;
    i.shape = std::move(s);
    i.kind = kind;
    return i;
  };
  c.samples = {{"2-d", {spec({4, 5})}, attrs},
               {"3-d", {spec({2, 3, 4})}, attrs},
               {"0-dim", {spec({})}, attrs},
               {"size-1 dim", {spec({3, 1})}, attrs},
               {"contiguous", {spec({1027, 37})}, attrs, false}};
  c.reference = [f](const std::vector<Ref>& in, const Attrs&) { return std::vector<Ref>{map1(in[0], f)}; };
  return c;
}

OpCase int_binary_extra(OpCase c) {
  c.samples.push_back({"int64", {index({3, 4}, 7), index({4}, 7)}});
  c.samples.push_back({"int32", {index32({2, 3}, 9), index32({2, 3}, 9)}});
  c.samples.push_back({"int32 contiguous", {index32({61, 37}, 9), index32({61, 37}, 9)}, NoAttrs{}, false});
  return c;
}

}  // namespace

OpCase case_add() {
  return int_binary_extra(binary_case([](double a, double b) { return a + b; }));
}
OpCase case_sub() {
  return int_binary_extra(binary_case([](double a, double b) { return a - b; }));
}
OpCase case_mul() {
  return int_binary_extra(binary_case([](double a, double b) { return a * b; }));
}
OpCase case_div() {
  return binary_case([](double a, double b) { return a / b; }, /*away_from_zero_b=*/true);
}

OpCase case_gt() {
  OpCase c = int_binary_extra(binary_case([](double a, double b) { return a > b ? 1.0 : 0.0; }));
  c.gradcheck = false;
  return c;
}
OpCase case_eq() {
  OpCase c = binary_case([](double a, double b) { return a == b ? 1.0 : 0.0; });
  c.samples.push_back({"int64 with ties", {index({4, 6}, 3), index({6}, 3)}});
  c.gradcheck = false;
  return c;
}

OpCase case_neg() {
  OpCase c = unary_case([](double x) { return -x; });
  c.samples.push_back({"int64", {index({5}, 10)}});
  c.samples.push_back({"int64 contiguous", {index({61, 37}, 10)}, NoAttrs{}, false});
  return c;
}
OpCase case_abs() {
  return unary_case([](double x) { return std::abs(x); }, Kind::away0);
}
OpCase case_exp() {
  return unary_case([](double x) { return std::exp(x); });
}
OpCase case_log() {
  return unary_case([](double x) { return std::log(x); }, Kind::positive);
}
OpCase case_sqrt() {
  return unary_case([](double x) { return std::sqrt(x); }, Kind::positive);
}
OpCase case_rsqrt() {
  return unary_case([](double x) { return 1 / std::sqrt(x); }, Kind::positive);
}
OpCase case_tanh() {
  return unary_case([](double x) { return std::tanh(x); });
}
OpCase case_sigmoid() {
  return unary_case([](double x) { return 1 / (1 + std::exp(-x)); });
}
OpCase case_relu() {
  return unary_case([](double x) { return x > 0 ? x : 0; }, Kind::away0);
}

OpCase case_pow() {
  OpCase c;
  for (double p : {2.0, 3.0, 0.5, -1.0, 1.7}) c.samples.push_back({cat("p=", p), {positive({3, 4})}, ScalarAttrs{p}});
  c.samples.push_back({"p=1.7 contiguous", {positive({1027, 37})}, ScalarAttrs{1.7}, false});
  c.reference = [](const std::vector<Ref>& in, const Attrs& a) {
    const double p = std::get<ScalarAttrs>(a).value;
    return std::vector<Ref>{map1(in[0], [p](double x) { return std::pow(x, p); })};
  };
  return c;
}

OpCase case_gelu() {
  OpCase c;
  for (bool t : {false, true}) {
    const char* form = t ? "tanh" : "erf";
    c.samples.push_back({cat(form, " 2-d"), {real({4, 6})}, GeluAttrs{t}});
    c.samples.push_back({cat(form, " broadcast-free 3-d"), {real({2, 3, 2})}, GeluAttrs{t}});
    c.samples.push_back({cat(form, " contiguous"), {real({1027, 37})}, GeluAttrs{t}, false});
  }
  c.reference = [](const std::vector<Ref>& in, const Attrs& a) {
    const bool t = std::get<GeluAttrs>(a).tanh;
    return std::vector<Ref>{map1(in[0], t ? gelu_tanh : gelu_exact)};
  };
  return c;
}

OpCase case_gelu_backward() {
  OpCase c;
  for (bool t : {false, true}) {
    c.samples.push_back({t ? "tanh" : "erf", {real({3, 5}), real({3, 5})}, GeluAttrs{t}});
    c.samples.push_back(
        {t ? "tanh contiguous" : "erf contiguous", {real({1027, 37}), real({1027, 37})}, GeluAttrs{t}, false});
  }
  c.reference = [](const std::vector<Ref>& in, const Attrs& a) {
    const bool t = std::get<GeluAttrs>(a).tanh;
    auto d = [t](double x) {
      if (!t) {  // Phi(x) + x phi(x)
        const double cdf = 0.5 * std::erfc(-x / std::sqrt(2.0));
        return cdf + x * std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
      }
      const double k = std::sqrt(2.0 / M_PI), u = k * (x + 0.044715 * x * x * x);
      const double sech2 = 1 / (std::cosh(u) * std::cosh(u));
      return 0.5 * (1 + std::tanh(u)) + 0.5 * x * sech2 * k * (1 + 3 * 0.044715 * x * x);
    };
    return std::vector<Ref>{map2(in[0], in[1], [d](double g, double x) { return g * d(x); })};
  };
  c.gradcheck = false;
  return c;
}

// Inputs (grad, y): y stands for a relu output, maybe dropped; its sign picks the gradient.
OpCase case_relu_backward() {
  OpCase c;
  for (double scale : {1.0, 1.25}) {
    c.samples.push_back({cat("scale ", scale), {real({3, 5}), away0({3, 5})}, ScalarAttrs{scale}});
    c.samples.push_back(
        {cat("scale ", scale, " contiguous"), {real({1027, 37}), away0({1027, 37})}, ScalarAttrs{scale}, false});
  }
  c.reference = [](const std::vector<Ref>& in, const Attrs& a) {
    const double scale = std::get<ScalarAttrs>(a).value;
    return std::vector<Ref>{map2(in[0], in[1], [scale](double g, double y) { return y > 0 ? g * scale : 0.0; })};
  };
  c.gradcheck = false;
  return c;
}

OpCase case_masked_fill() {
  OpCase c;
  c.samples = {{"same shape", {real({3, 4}), mask({3, 4})}, ScalarAttrs{-100}},
               {"broadcast mask", {real({2, 3, 4}), mask({3, 1})}, ScalarAttrs{0.5}},
               {"int64", {index({4, 4}, 100), mask({4})}, ScalarAttrs{-7}},
               {"contiguous", {real({1027, 37}), mask({1027, 37})}, ScalarAttrs{-100}, false},
               {"row mask", {real({64, 48}), mask({48})}, ScalarAttrs{2.5}, false}};
  c.reference = [](const std::vector<Ref>& in, const Attrs& a) {
    const double v = std::get<ScalarAttrs>(a).value;
    return std::vector<Ref>{map2(in[0], in[1], [v](double x, double m) { return m != 0 ? v : x; })};
  };
  return c;
}

OpCase case_where() {
  OpCase c;
  c.samples = {{"same shape", {mask({3, 4}), real({3, 4}), real({3, 4})}},
               {"all broadcast", {mask({3, 1}), real({4}), real({2, 1, 1})}},
               {"0-dim branch", {mask({2, 3}), real({2, 3}), constant(real({}))}},
               {"contiguous", {mask({1027, 37}), real({1027, 37}), real({1027, 37})}, NoAttrs{}, false}};
  c.reference = [](const std::vector<Ref>& in, const Attrs&) {
    Ref r(broadcast(broadcast(in[0].shape, in[1].shape), in[2].shape));
    for_each_index(r.shape, [&](const std::vector<int64_t>& i) {
      r.at(i) = in[0].bcast(i) != 0 ? in[1].bcast(i) : in[2].bcast(i);
    });
    return std::vector<Ref>{r};
  };
  return c;
}

}  // namespace qkv::test
