// Elementwise CPU kernels: arithmetic and comparisons with broadcasting, unary math, GELU and
// its derivative, masked_fill and where. Float math goes through Eigen's vectorized functions.
#include <Eigen/Core>
#include <cmath>
#include <unsupported/Eigen/SpecialFunctions>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/loops.h"

namespace qkv::kernels::cpu {
namespace {

template <class F> void binary_numeric(const KernelArgs& k, const char* op, F&& f) {
  visit_numeric(k.in[0].dtype(), op, [&]<class T>() { binary_map<T, T>(k.out[0], k.in[0], k.in[1], f); });
}
template <class F> void compare(const KernelArgs& k, const char* op, F&& f) {
  visit_numeric(k.in[0].dtype(), op, [&]<class T>() { binary_map<bool, T>(k.out[0], k.in[0], k.in[1], f); });
}
template <class F> void unary_float(const KernelArgs& k, const char* op, F&& f) {
  visit_float(k.in[0].dtype(), op, [&]<class T>() { unary_map<T, T>(k.out[0], k.in[0], f); });
}

constexpr double kSqrt1_2 = 0.70710678118654752440;      // 1/sqrt(2)
constexpr double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2/pi)
constexpr double kInvSqrt2Pi = 0.39894228040143267794;   // 1/sqrt(2 pi)
constexpr double kGeluCubic = 0.044715;

}  // namespace

void add(const KernelArgs& k) {
  binary_numeric(k, "add", [](const auto& a, const auto& b) { return a + b; });
}
void sub(const KernelArgs& k) {
  binary_numeric(k, "sub", [](const auto& a, const auto& b) { return a - b; });
}
void mul(const KernelArgs& k) {
  binary_numeric(k, "mul", [](const auto& a, const auto& b) { return a * b; });
}
void div(const KernelArgs& k) {
  visit_float(k.in[0].dtype(), "div", [&]<class T>() {
    binary_map<T, T>(k.out[0], k.in[0], k.in[1], [](const auto& a, const auto& b) { return a / b; });
  });
}
void gt(const KernelArgs& k) {
  compare(k, "gt", [](const auto& a, const auto& b) { return a > b; });
}
void eq(const KernelArgs& k) {
  compare(k, "eq", [](const auto& a, const auto& b) { return a == b; });
}

void neg(const KernelArgs& k) {
  visit_numeric(k.in[0].dtype(), "neg",
                [&]<class T>() { unary_map<T, T>(k.out[0], k.in[0], [](const auto& x) { return -x; }); });
}
void abs(const KernelArgs& k) {
  visit_numeric(k.in[0].dtype(), "abs",
                [&]<class T>() { unary_map<T, T>(k.out[0], k.in[0], [](const auto& x) { return x.abs(); }); });
}
void exp(const KernelArgs& k) {
  unary_float(k, "exp", [](const auto& x) { return x.exp(); });
}
void log(const KernelArgs& k) {
  unary_float(k, "log", [](const auto& x) { return x.log(); });
}
void sqrt(const KernelArgs& k) {
  unary_float(k, "sqrt", [](const auto& x) { return x.sqrt(); });
}
void rsqrt(const KernelArgs& k) {
  unary_float(k, "rsqrt", [](const auto& x) { return x.rsqrt(); });
}
void tanh(const KernelArgs& k) {
  unary_float(k, "tanh", [](const auto& x) { return x.tanh(); });
}
void sigmoid(const KernelArgs& k) {
  unary_float(k, "sigmoid", [](const auto& x) { return x.logistic(); });
}

void relu(const KernelArgs& k) {
  unary_float(k, "relu", [](const auto& x) {
    using T = typename std::decay_t<decltype(x)>::Scalar;
    return x.max(T(0));
  });
}

void pow(const KernelArgs& k) {
  const double p = attr<ScalarAttrs>(k.attrs, "pow").value;
  visit_float(k.in[0].dtype(), "pow", [&]<class T>() {
    const Tensor &out = k.out[0], &x = k.in[0];
    if (p == 2) unary_map<T, T>(out, x, [](const auto& v) { return v.square(); });
    else if (p == 0.5) unary_map<T, T>(out, x, [](const auto& v) { return v.sqrt(); });
    else if (p == -1) unary_map<T, T>(out, x, [](const auto& v) { return v.inverse(); });
    else unary_map<T, T>(out, x, [p](const auto& v) { return v.pow(T(p)); });
  });
}

void gelu(const KernelArgs& k) {
  const bool tanh_form = attr<GeluAttrs>(k.attrs, "gelu").tanh;
  visit_float(k.in[0].dtype(), "gelu", [&]<class T>() {
    if (tanh_form)
      unary_map<T, T>(k.out[0], k.in[0], [](const auto& x) {
        return T(0.5) * x * (T(1) + (T(kSqrt2OverPi) * (x + T(kGeluCubic) * x.cube())).tanh());
      });
    else
      unary_map<T, T>(k.out[0], k.in[0], [](const auto& x) { return T(0.5) * x * (T(1) + (x * T(kSqrt1_2)).erf()); });
  });
}

// Inputs (grad, x): grad * d gelu(x) / dx.
void gelu_backward(const KernelArgs& k) {
  const bool tanh_form = attr<GeluAttrs>(k.attrs, "gelu_backward").tanh;
  visit_float(k.in[0].dtype(), "gelu_backward", [&]<class T>() {
    if (tanh_form)
      binary_map<T, T>(k.out[0], k.in[0], k.in[1], [](const auto& g, const auto& x) {
        // u is a local array: evaluate the result before it goes out of scope.
        const Arr<T> u = (T(kSqrt2OverPi) * (x + T(kGeluCubic) * x.cube())).tanh();
        const auto du = T(kSqrt2OverPi) * (T(1) + T(3 * kGeluCubic) * x.square());
        return (g * (T(0.5) * (T(1) + u) + T(0.5) * x * (T(1) - u.square()) * du)).eval();
      });
    else
      binary_map<T, T>(k.out[0], k.in[0], k.in[1], [](const auto& g, const auto& x) {
        return g * (T(0.5) * (T(1) + (x * T(kSqrt1_2)).erf()) + x * T(kInvSqrt2Pi) * (T(-0.5) * x.square()).exp());
      });
  });
}

// Inputs (grad, y = relu output, maybe dropped): grad * scale where y > 0, else 0.
void relu_backward(const KernelArgs& k) {
  const double scale = attr<ScalarAttrs>(k.attrs, "relu_backward").value;
  visit_float(k.in[0].dtype(), "relu_backward", [&]<class T>() {
    binary_map<T, T>(k.out[0], k.in[0], k.in[1],
                     [s = T(scale)](const auto& g, const auto& y) { return (y > T(0)).select(g * s, T(0)); });
  });
}

namespace {

// Runs f(i, p0, p1, ...) over a row where each input's stride is 0 (broadcast) or 1 as template
// constants, so the select loops vectorize; other strides take the general loop.
template <int... S, class F, class... P> void row_with_strides(int64_t n, F&& f, P... p) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) f(i, p[S * i]...);
}

template <class F, class P0, class P1, class P2>
void select_row(int64_t n, const std::array<int64_t, 4>& is, F&& f, P0 a, P1 b, P2 c) {
  const int pattern = (is[1] == 1) | (is[2] == 1) << 1 | (is[3] == 1) << 2;
  const bool unit_or_zero = (is[1] | 1) == 1 && (is[2] | 1) == 1 && (is[3] | 1) == 1;
  if (!unit_or_zero) {
    for (int64_t i = 0; i < n; ++i) f(i, a[i * is[1]], b[i * is[2]], c[i * is[3]]);
    return;
  }
  switch (pattern) {
    case 0: return row_with_strides<0, 0, 0>(n, f, a, b, c);
    case 1: return row_with_strides<1, 0, 0>(n, f, a, b, c);
    case 2: return row_with_strides<0, 1, 0>(n, f, a, b, c);
    case 3: return row_with_strides<1, 1, 0>(n, f, a, b, c);
    case 4: return row_with_strides<0, 0, 1>(n, f, a, b, c);
    case 5: return row_with_strides<1, 0, 1>(n, f, a, b, c);
    case 6: return row_with_strides<0, 1, 1>(n, f, a, b, c);
    default: return row_with_strides<1, 1, 1>(n, f, a, b, c);
  }
}

}  // namespace

// Inputs (x, mask): out = mask ? value : x, the mask broadcast to x.
void masked_fill(const KernelArgs& k) {
  const double value = attr<ScalarAttrs>(k.attrs, "masked_fill").value;
  const Tensor& mask = k.in[1];
  visit_numeric(k.in[0].dtype(), "masked_fill", [&]<class T>() {
    T* o = k.out[0].data<T>();
    const T* x = static_cast<const T*>(k.in[0].raw_data());
    const uint8_t* m = static_cast<const uint8_t*>(mask.raw_data());
    const T v = T(value);
    map_rows<2>(k.out[0], {&k.in[0], &mask}, [&](const auto& off, int64_t n, const auto& is) {
      T* out = o + off[0];
      const std::array<int64_t, 4> strides{is[0], is[1], is[2], 0};
      select_row(
          n, strides, [&](int64_t i, T xv, uint8_t mv, T) { out[i] = mv ? v : xv; }, x + off[1], m + off[2], &v);
    });
  });
}

// Inputs (cond, a, b): out = cond ? a : b, all three broadcast together.
void where(const KernelArgs& k) {
  visit_numeric(k.in[1].dtype(), "where", [&]<class T>() {
    T* o = k.out[0].data<T>();
    const uint8_t* c = static_cast<const uint8_t*>(k.in[0].raw_data());
    const T* a = static_cast<const T*>(k.in[1].raw_data());
    const T* b = static_cast<const T*>(k.in[2].raw_data());
    map_rows<3>(k.out[0], {&k.in[0], &k.in[1], &k.in[2]}, [&](const auto& off, int64_t n, const auto& is) {
      T* out = o + off[0];
      select_row(
          n, is, [&](int64_t i, uint8_t cv, T av, T bv) { out[i] = cv ? av : bv; }, c + off[1], a + off[2], b + off[3]);
    });
  });
}

}  // namespace qkv::kernels::cpu
