// Random kernels on the Philox stream: element i of the output (row-major order) takes element
// i of the stream at the op's (seed, offset), exactly as the CUDA kernels do. Scaling uses an
// explicit fma on both sides, so the results do not depend on the compiler contracting a*b+c.
#include <algorithm>
#include <cmath>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/loops.h"
#include "kernels/cpu/philox_batch.h"
#include "tensor/philox.h"
#include "tensor/view.h"

namespace qkv::kernels::cpu {
namespace {

// Calls f(i0, m, words) for consecutive element ranges [i0, i0 + m) of [0, n), words[j] being
// element i0 + j's 32 random bits. Blocks are generated kPhiloxBatch at a time (vectorized), in
// parallel chunks; callers write their loop over j with locals so it vectorizes too.
template <class F> void for_each_batch(int64_t n, uint64_t seed, uint64_t offset, F&& f) {
  constexpr int64_t kWords = 4 * kPhiloxBatch;
  const int64_t batches = (n + kWords - 1) / kWords;
#pragma omp parallel for schedule(static) if (n >= kParallelGrain)
  for (int64_t b = 0; b < batches; ++b) {
    uint32_t words[kWords];
    philox_batch(seed, offset + uint64_t(b) * kPhiloxBatch, words);
    f(b * kWords, std::min(kWords, n - b * kWords), words);
  }
}

template <class T> T unit(uint32_t x) {
  if constexpr (std::is_same_v<T, float>) return philox::to_unit_float(x);
  else return philox::to_unit_double(x);
}

}  // namespace

void uniform(const KernelArgs& k) {
  const auto& a = attr<RandomAttrs>(k.attrs, "uniform");
  visit_float(a.dtype, "uniform", [&]<class T>() {
    T* o = k.out[0].data<T>();
    const T lo = T(a.a), span = T(a.b - a.a);
    for_each_batch(k.out[0].numel(), a.seed, a.offset, [=](int64_t i0, int64_t m, const uint32_t* w) {
      for (int64_t j = 0; j < m; ++j) o[i0 + j] = std::fma(span, unit<T>(w[j]), lo);
    });
  });
}

void bernoulli(const KernelArgs& k) {
  const auto& a = attr<RandomAttrs>(k.attrs, "bernoulli");
  visit_float(a.dtype, "bernoulli", [&]<class T>() {
    T* o = k.out[0].data<T>();
    const uint64_t threshold = unit_threshold(a.a);
    for_each_batch(k.out[0].numel(), a.seed, a.offset, [=](int64_t i0, int64_t m, const uint32_t* w) {
      for (int64_t j = 0; j < m; ++j) o[i0 + j] = w[j] < threshold ? T(1) : T(0);
    });
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

namespace {

// out = f(x) * keep / (1 - p), keep = (u_i >= p), f the identity or relu.
template <bool kRelu> void dropout_of(const KernelArgs& k, const char* op) {
  const auto& a = attr<DropoutAttrs>(k.attrs, op);
  const Tensor x = raw::contiguous(k.in[0]);
  visit_float(x.dtype(), op, [&]<class T>() {
    const T* xp = x.data<T>();
    T* o = k.out[0].data<T>();
    const T scale = a.p < 1 ? T(1.0 / (1.0 - a.p)) : T(0);
    const uint64_t threshold = unit_threshold(a.p);
    if (threshold > UINT32_MAX) {  // p == 1: every element dropped
      std::fill(o, o + x.numel(), T(0));
      return;
    }
    // 32-bit compares and a float select: the loop vectorizes.
    const uint32_t t32 = uint32_t(threshold);
    for_each_batch(x.numel(), a.seed, a.offset, [=](int64_t i0, int64_t m, const uint32_t* w) {
      const T* __restrict in = xp + i0;
      T* __restrict out = o + i0;
#pragma omp simd
      for (int64_t j = 0; j < m; ++j) {
        // Read unconditionally and select once: the loop vectorizes. relu drops x < 0 by the
        // same select (a NaN passes, as through relu).
        const T kept = in[j] * scale;
        out[j] = w[j] >= t32 && !(kRelu && in[j] < T(0)) ? kept : T(0);
      }
    });
  });
}

}  // namespace

// Input x -> dropout(x). Its own backward (same seed).
void dropout(const KernelArgs& k) { dropout_of<false>(k, "dropout"); }

// Input x -> dropout(relu(x)), the numbers dropout draws.
void relu_dropout(const KernelArgs& k) { dropout_of<true>(k, "relu_dropout"); }

}  // namespace qkv::kernels::cpu
