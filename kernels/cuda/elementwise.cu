// Elementwise CUDA kernels: arithmetic and comparisons with broadcasting, unary math, GELU and
// its derivative, masked_fill and where. Each is an element functor (the formulas follow
// kernels/cpu/elementwise.cpp) run by launch_elementwise (launch.cuh): 16-byte vector loads and
// stores when the operands are contiguous (or a bias-like row broadcast along the last dim) and
// aligned, otherwise the grid-stride strided kernel over the output and its broadcast inputs.
// Arithmetic and comparisons take a 0-dim CPU operand as a kernel argument (see binary()).
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/launch.cuh"

namespace qkv::kernels::cuda {
namespace {

constexpr double kSqrt1_2 = 0.70710678118654752440;      // 1/sqrt(2)
constexpr double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2/pi)
constexpr double kInvSqrt2Pi = 0.39894228040143267794;   // 1/sqrt(2 pi)
constexpr double kGeluCubic = 0.044715;

template <class T> const T* in_ptr(const Tensor& t) { return static_cast<const T*>(t.raw_data()); }

// A binary op with one operand a host scalar (a 0-dim CPU tensor: `x * 0.5`), whose value
// travels as a kernel argument.
template <class TI, class Op, bool ScalarLeft> struct WithScalar {
  TI s;
  Op op;
  __device__ auto operator()(TI x) const { return ScalarLeft ? op(s, x) : op(x, s); }
};

template <class TO, class TI, class Op> void binary(const Tensor& out, const Tensor& a, const Tensor& b, Op op) {
  set_device(out);
  if (a.device().is_cpu() || b.device().is_cpu()) {  // dispatch lets only 0-dim CPU operands through
    const bool left = a.device().is_cpu();
    const Tensor& x = left ? b : a;
    const TI s = *in_ptr<TI>(left ? a : b);
    if (left) launch_elementwise<TO, TI>(out, {&x}, WithScalar<TI, Op, true>{s, op});
    else launch_elementwise<TO, TI>(out, {&x}, WithScalar<TI, Op, false>{s, op});
    return;
  }
  launch_elementwise<TO, TI, TI>(out, {&a, &b}, op);
}

template <class T, class Op> void unary(const Tensor& out, const Tensor& x, Op op) {
  set_device(out);
  launch_elementwise<T, T>(out, {&x}, op);
}

struct Add {
  template <class T> __device__ T operator()(T a, T b) const { return a + b; }
};
struct Sub {
  template <class T> __device__ T operator()(T a, T b) const { return a - b; }
};
struct Mul {
  template <class T> __device__ T operator()(T a, T b) const { return a * b; }
};
struct Div {
  template <class T> __device__ T operator()(T a, T b) const { return a / b; }
};
struct Greater {
  template <class T> __device__ bool operator()(T a, T b) const { return a > b; }
};
struct Equal {
  template <class T> __device__ bool operator()(T a, T b) const { return a == b; }
};

struct Neg {
  template <class T> __device__ T operator()(T x) const { return -x; }
};
struct Abs {
  template <class T> __device__ T operator()(T x) const { return x < T(0) ? -x : x; }
};
struct Exp {
  template <class T> __device__ T operator()(T x) const { return exp_(x); }
};
struct Log {
  template <class T> __device__ T operator()(T x) const { return log_(x); }
};
struct Sqrt {
  template <class T> __device__ T operator()(T x) const { return sqrt_(x); }
};
struct Rsqrt {
  template <class T> __device__ T operator()(T x) const { return T(1) / sqrt_(x); }
};
struct Tanh {
  template <class T> __device__ T operator()(T x) const { return tanh_(x); }
};
struct Sigmoid {
  template <class T> __device__ T operator()(T x) const { return T(1) / (T(1) + exp_(-x)); }
};
// max(x, 0) as std::max(x, 0) evaluates it: NaN and -0 pass through.
struct Relu {
  template <class T> __device__ T operator()(T x) const { return x < T(0) ? T(0) : x; }
};

// pow with the CPU kernel's special cases (square, sqrt, reciprocal) chosen on the host.
enum class PowKind : int { square, sqrt, inverse, general };
template <class T> struct Pow {
  PowKind kind;
  T p;
  __device__ T operator()(T x) const {
    switch (kind) {
      case PowKind::square: return x * x;
      case PowKind::sqrt: return sqrt_(x);
      case PowKind::inverse: return T(1) / x;
      default: return pow_(x, p);
    }
  }
};

template <class T> struct GeluErf {
  __device__ T operator()(T x) const { return T(0.5) * x * (T(1) + erf_(x * T(kSqrt1_2))); }
};
template <class T> struct GeluTanh {
  __device__ T operator()(T x) const {
    return T(0.5) * x * (T(1) + tanh_(T(kSqrt2OverPi) * (x + T(kGeluCubic) * (x * x * x))));
  }
};

// g * scale where the relu output y > 0 (relu's and relu_dropout's backward), else 0.
template <class T> struct ReluBackward {
  T scale;
  __device__ T operator()(T g, T y) const { return y > T(0) ? g * scale : T(0); }
};

// d gelu(x) / dx times the incoming gradient g.
template <class T> struct GeluErfBackward {
  __device__ T operator()(T g, T x) const {
    return g * (T(0.5) * (T(1) + erf_(x * T(kSqrt1_2))) + x * T(kInvSqrt2Pi) * exp_(T(-0.5) * (x * x)));
  }
};
template <class T> struct GeluTanhBackward {
  __device__ T operator()(T g, T x) const {
    const T u = tanh_(T(kSqrt2OverPi) * (x + T(kGeluCubic) * (x * x * x)));
    const T du = T(kSqrt2OverPi) * (T(1) + T(3 * kGeluCubic) * (x * x));
    return g * (T(0.5) * (T(1) + u) + T(0.5) * x * (T(1) - u * u) * du);
  }
};

// out = mask ? value : x.
template <class T> struct MaskedFillOp {
  T value;
  __device__ T operator()(T x, uint8_t mask) const { return mask ? value : x; }
};

// out = cond ? a : b.
struct WhereOp {
  template <class T> __device__ T operator()(uint8_t cond, T a, T b) const { return cond ? a : b; }
};

// ---- dtype dispatch -------------------------------------------------------------------------

template <class Op> void binary_numeric(const KernelArgs& k, const char* op_name, Op op) {
  visit_numeric(k.in[0].dtype(), op_name, [&]<class T>() { binary<T, T>(k.out[0], k.in[0], k.in[1], op); });
}
template <class Op> void compare(const KernelArgs& k, const char* op_name, Op op) {
  visit_numeric(k.in[0].dtype(), op_name, [&]<class T>() { binary<bool, T>(k.out[0], k.in[0], k.in[1], op); });
}
template <class Op> void unary_float(const KernelArgs& k, const char* op_name, Op op) {
  visit_float(k.in[0].dtype(), op_name, [&]<class T>() { unary<T>(k.out[0], k.in[0], op); });
}

}  // namespace

void add(const KernelArgs& k) { binary_numeric(k, "add", Add{}); }
void sub(const KernelArgs& k) { binary_numeric(k, "sub", Sub{}); }
void mul(const KernelArgs& k) { binary_numeric(k, "mul", Mul{}); }
void div(const KernelArgs& k) {
  visit_float(k.in[0].dtype(), "div", [&]<class T>() { binary<T, T>(k.out[0], k.in[0], k.in[1], Div{}); });
}
void gt(const KernelArgs& k) { compare(k, "gt", Greater{}); }
void eq(const KernelArgs& k) { compare(k, "eq", Equal{}); }

void neg(const KernelArgs& k) {
  visit_numeric(k.in[0].dtype(), "neg", [&]<class T>() { unary<T>(k.out[0], k.in[0], Neg{}); });
}
void abs(const KernelArgs& k) {
  visit_numeric(k.in[0].dtype(), "abs", [&]<class T>() { unary<T>(k.out[0], k.in[0], Abs{}); });
}
void exp(const KernelArgs& k) { unary_float(k, "exp", Exp{}); }
void log(const KernelArgs& k) { unary_float(k, "log", Log{}); }
void sqrt(const KernelArgs& k) { unary_float(k, "sqrt", Sqrt{}); }
void rsqrt(const KernelArgs& k) { unary_float(k, "rsqrt", Rsqrt{}); }
void tanh(const KernelArgs& k) { unary_float(k, "tanh", Tanh{}); }
void sigmoid(const KernelArgs& k) { unary_float(k, "sigmoid", Sigmoid{}); }
void relu(const KernelArgs& k) { unary_float(k, "relu", Relu{}); }

void pow(const KernelArgs& k) {
  const double p = attr<ScalarAttrs>(k.attrs, "pow").value;
  const PowKind kind = p == 2     ? PowKind::square
                       : p == 0.5 ? PowKind::sqrt
                       : p == -1  ? PowKind::inverse
                                  : PowKind::general;
  visit_float(k.in[0].dtype(), "pow", [&]<class T>() { unary<T>(k.out[0], k.in[0], Pow<T>{kind, T(p)}); });
}

void gelu(const KernelArgs& k) {
  const bool tanh_form = attr<GeluAttrs>(k.attrs, "gelu").tanh;
  visit_float(k.in[0].dtype(), "gelu", [&]<class T>() {
    if (tanh_form) unary<T>(k.out[0], k.in[0], GeluTanh<T>{});
    else unary<T>(k.out[0], k.in[0], GeluErf<T>{});
  });
}

// Inputs (grad, x): grad * d gelu(x) / dx.
void gelu_backward(const KernelArgs& k) {
  const bool tanh_form = attr<GeluAttrs>(k.attrs, "gelu_backward").tanh;
  visit_float(k.in[0].dtype(), "gelu_backward", [&]<class T>() {
    if (tanh_form) binary<T, T>(k.out[0], k.in[0], k.in[1], GeluTanhBackward<T>{});
    else binary<T, T>(k.out[0], k.in[0], k.in[1], GeluErfBackward<T>{});
  });
}

void relu_backward(const KernelArgs& k) {
  const double scale = attr<ScalarAttrs>(k.attrs, "relu_backward").value;
  visit_float(k.in[0].dtype(), "relu_backward",
              [&]<class T>() { binary<T, T>(k.out[0], k.in[0], k.in[1], ReluBackward<T>{T(scale)}); });
}

// Inputs (x, mask): out = mask ? value : x, the mask broadcast to x.
void masked_fill(const KernelArgs& k) {
  const double value = attr<ScalarAttrs>(k.attrs, "masked_fill").value;
  const Tensor &out = k.out[0], &x = k.in[0], &mask = k.in[1];
  visit_numeric(x.dtype(), "masked_fill", [&]<class T>() {
    set_device(out);
    launch_elementwise<T, T, uint8_t>(out, {&x, &mask}, MaskedFillOp<T>{T(value)});
  });
}

// Inputs (cond, a, b): out = cond ? a : b, all three broadcast together.
void where(const KernelArgs& k) {
  const Tensor &out = k.out[0], &c = k.in[0], &a = k.in[1], &b = k.in[2];
  visit_numeric(a.dtype(), "where", [&]<class T>() {
    set_device(out);
    launch_elementwise<T, uint8_t, T, T>(out, {&c, &a, &b}, WhereOp{});
  });
}

}  // namespace qkv::kernels::cuda
