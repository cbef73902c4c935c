// Building blocks of the CPU kernels: Eigen array views of a row of an operand (contiguous,
// broadcast or strided) and map_rows, which walks an output and its broadcast inputs row by row
// on OpenMP threads. Contiguous rows become Eigen expressions, so the loops are vectorized.
#pragma once
#include <Eigen/Core>
#include <array>

#include "tensor/strided_loop.h"
#include "tensor/tensor.h"

namespace qkv::kernels::cpu {

// Below this many elements a loop runs on one thread.
inline constexpr int64_t kParallelGrain = 1 << 15;

template <class T> using Arr = Eigen::Array<T, Eigen::Dynamic, 1>;
template <class T> using ArrMap = Eigen::Map<Arr<T>>;
template <class T> using ConstArrMap = Eigen::Map<const Arr<T>>;
template <class T> using StridedArrMap = Eigen::Map<const Arr<T>, 0, Eigen::InnerStride<>>;

// Calls fn(off, n, inner_strides) for every row of `out` (contiguous) with the K inputs
// broadcast to out's shape; off[0] is out's element offset, off[k + 1] input k's.
template <size_t K, class F> void map_rows(const Tensor& out, const std::array<const Tensor*, K>& ins, F&& fn) {
  std::array<Strides, K + 1> st;
  st[0] = out.strides();
  for (size_t k = 0; k < K; ++k) st[k + 1] = broadcast_strides(ins[k]->shape(), ins[k]->strides(), out.shape());
  auto L = make_strided_loop<K + 1>(out.shape(), st);
  const auto inner = L.inner_strides();
  for_each_row(L, kParallelGrain, [&](const std::array<int64_t, K + 1>& off, int64_t n) { fn(off, n, inner); });
}

// Applies an Eigen array expression f(x) to every element: out = f(x).
template <class TO, class TI, class F> void unary_map(const Tensor& out, const Tensor& x, F&& f) {
  TO* o = static_cast<TO*>(out.raw_data());
  const TI* xp = static_cast<const TI*>(x.raw_data());
  map_rows<1>(out, {&x}, [&](const auto& off, int64_t n, const auto& is) {
    ArrMap<TO> y(o + off[0], n);
    if (is[1] == 1) y = f(ConstArrMap<TI>(xp + off[1], n));
    else y = f(StridedArrMap<TI>(xp + off[1], n, Eigen::InnerStride<>(is[1])));
  });
}

// out = f(a, b) with broadcasting; the common stride patterns get vectorized expressions.
template <class TO, class TI, class F> void binary_map(const Tensor& out, const Tensor& a, const Tensor& b, F&& f) {
  TO* o = static_cast<TO*>(out.raw_data());
  const TI* ap = static_cast<const TI*>(a.raw_data());
  const TI* bp = static_cast<const TI*>(b.raw_data());
  map_rows<2>(out, {&a, &b}, [&](const auto& off, int64_t n, const auto& is) {
    ArrMap<TO> y(o + off[0], n);
    const TI* pa = ap + off[1];
    const TI* pb = bp + off[2];
    if (is[1] == 1 && is[2] == 1) y = f(ConstArrMap<TI>(pa, n), ConstArrMap<TI>(pb, n));
    else if (is[1] == 1 && is[2] == 0) y = f(ConstArrMap<TI>(pa, n), Arr<TI>::Constant(n, *pb));
    else if (is[1] == 0 && is[2] == 1) y = f(Arr<TI>::Constant(n, *pa), ConstArrMap<TI>(pb, n));
    else
      y = f(StridedArrMap<TI>(pa, n, Eigen::InnerStride<>(is[1])),
            StridedArrMap<TI>(pb, n, Eigen::InnerStride<>(is[2])));
  });
}

}  // namespace qkv::kernels::cpu
