// Random kernels on the Philox stream: element i of the output (row-major order) takes element
// i of the stream at the op's (seed, offset), exactly as the CUDA kernels do. Scaling uses an
// explicit fma on both sides, so the results do not depend on the compiler contracting a*b+c.
#include <cmath>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/loops.h"
#include "tensor/philox.h"
#include "tensor/view.h"

namespace qkv::kernels::cpu {
namespace {

// Calls f(i, block) for each element i with its Philox block, computing each block once.
template <class F>
void for_each_block(int64_t n, uint64_t seed, uint64_t offset, F&& f) {
  const int64_t blocks = (n + 3) / 4;
#pragma omp parallel for schedule(static) if (n >= kParallelGrain)
  for (int64_t b = 0; b < blocks; ++b) {
    const philox::U32x4 bits = philox::block(seed, offset + uint64_t(b));
    for (int64_t j = 0; j < 4 && b * 4 + j < n; ++j) f(b * 4 + j, bits.v[j]);
  }
}

template <class T>
T unit(uint32_t x) {
  if constexpr (std::is_same_v<T, float>) return philox::to_unit_float(x);
  else return philox::to_unit_double(x);
}

}  // namespace

void uniform(const KernelArgs& k) {
  const auto& a = attr<RandomAttrs>(k.attrs, "uniform");
  visit_float(a.dtype, "uniform", [&]<class T>() {
    T* o = k.out[0].data<T>();
    const T lo = T(a.a), span = T(a.b - a.a);
    for_each_block(k.out[0].numel(), a.seed, a.offset, [&](int64_t i, uint32_t x) { o[i] = std::fma(span, unit<T>(x), lo); });
  });
}

void bernoulli(const KernelArgs& k) {
  const auto& a = attr<RandomAttrs>(k.attrs, "bernoulli");
  visit_float(a.dtype, "bernoulli", [&]<class T>() {
    T* o = k.out[0].data<T>();
    for_each_block(k.out[0].numel(), a.seed, a.offset,
                   [&](int64_t i, uint32_t x) { o[i] = philox::to_unit_double(x) < a.a ? T(1) : T(0); });
  });
}

void normal(const KernelArgs& k) {
  const auto& a = attr<RandomAttrs>(k.attrs, "normal");
  visit_float(a.dtype, "normal", [&]<class T>() {
    T* o = k.out[0].data<T>();
    const int64_t n = k.out[0].numel();
#pragma omp parallel for schedule(static) if (n >= kParallelGrain / 4)
    for (int64_t i = 0; i < n; ++i) o[i] = T(std::fma(a.b, philox::normal(a.seed, a.offset, uint64_t(i)), a.a));
  });
}

// Input x -> out = x * keep / (1 - p), keep = (u_i >= p). Its own backward (same seed).
void dropout(const KernelArgs& k) {
  const auto& a = attr<DropoutAttrs>(k.attrs, "dropout");
  const Tensor x = raw::contiguous(k.in[0]);
  visit_float(x.dtype(), "dropout", [&]<class T>() {
    const T* xp = x.data<T>();
    T* o = k.out[0].data<T>();
    const T scale = a.p < 1 ? T(1.0 / (1.0 - a.p)) : T(0);
    for_each_block(x.numel(), a.seed, a.offset, [&](int64_t i, uint32_t u) {
      o[i] = philox::to_unit_double(u) >= a.p ? xp[i] * scale : T(0);
    });
  });
}

}  // namespace qkv::kernels::cpu
