// Random CUDA kernels on the Philox stream (tensor/philox.h): uniform, normal, bernoulli,
// dropout and relu_dropout. Element i of the output takes element i of the stream at the op's
// (seed, offset), exactly as kernels/cpu/random.cpp does, so all but normal match the CPU
// bit for bit. `lo + span * u` and `mean + std * z` are written as explicit FMAs: GCC contracts
// them into FMAs in the CPU kernels (C++ mode, -march=native), and the GPU has to round the same
// way. normal goes through the same double Box-Muller, but CUDA's log/sin/cos may differ from
// the host's libm in the last bit, so it matches the CPU closely rather than exactly.
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/launch.cuh"
#include "tensor/philox.h"
#include "tensor/view.h"

namespace qkv::kernels::cuda {
namespace {

__device__ __forceinline__ float fma_(float a, float b, float c) { return fmaf(a, b, c); }
__device__ __forceinline__ double fma_(double a, double b, double c) { return ::fma(a, b, c); }

template <class T> __device__ __forceinline__ T unit(uint32_t x) {
  if constexpr (std::is_same_v<T, float>) return philox::to_unit_float(x);
  else return philox::to_unit_double(x);
}

// One thread per Philox block: f(i, bits) for its (up to) four elements.
template <class F> __global__ void philox_blocks_kernel(int64_t n, uint64_t seed, uint64_t offset, F f) {
  const int64_t blocks = (n + 3) / 4;
  for (int64_t b = global_thread(); b < blocks; b += grid_threads()) {
    const philox::U32x4 bits = philox::block(seed, offset + uint64_t(b));
    for (int j = 0; j < 4 && b * 4 + j < n; ++j) f(b * 4 + j, bits.v[j]);
  }
}

template <class F> void launch_philox(const Tensor& out, uint64_t seed, uint64_t offset, F f) {
  const int64_t n = out.numel();
  if (n == 0) return;
  set_device(out);
  QKV_LAUNCH(blocks_for((n + 3) / 4, kThreads), kThreads, 0, launch_stream(), philox_blocks_kernel)(n, seed, offset, f);
  QKV_CUDA_LAUNCH_CHECK();
}

template <class T> struct UniformFn {
  T* out;
  T lo, span;
  __device__ void operator()(int64_t i, uint32_t x) const { out[i] = fma_(span, unit<T>(x), lo); }
};

template <class T> struct BernoulliFn {
  T* out;
  double p;
  __device__ void operator()(int64_t i, uint32_t x) const { out[i] = philox::to_unit_double(x) < p ? T(1) : T(0); }
};

// f(x) * keep * scale, f the identity or relu (relu_dropout).
template <class T, bool kRelu> struct DropoutFn {
  const T* x;
  T* out;
  double p;
  T scale;
  __device__ void operator()(int64_t i, uint32_t u) const {
    const T v = kRelu && x[i] < T(0) ? T(0) : x[i];
    out[i] = philox::to_unit_double(u) >= p ? v * scale : T(0);
  }
};

// Box-Muller per element (philox::normal, in double), then mean + std * z.
template <class T> struct NormalFn {
  T* out;
  double mean, stddev;
  uint64_t seed, offset;
  __device__ void operator()(int64_t i) const {
    out[i] = T(::fma(stddev, philox::normal(seed, offset, uint64_t(i)), mean));
  }
};

}  // namespace

void uniform(const KernelArgs& k) {
  const auto& a = attr<RandomAttrs>(k.attrs, "uniform");
  visit_float(a.dtype, "uniform", [&]<class T>() {
    launch_philox(k.out[0], a.seed, a.offset, UniformFn<T>{k.out[0].data<T>(), T(a.a), T(a.b - a.a)});
  });
}

void bernoulli(const KernelArgs& k) {
  const auto& a = attr<RandomAttrs>(k.attrs, "bernoulli");
  visit_float(a.dtype, "bernoulli", [&]<class T>() {
    launch_philox(k.out[0], a.seed, a.offset, BernoulliFn<T>{k.out[0].data<T>(), a.a});
  });
}

void normal(const KernelArgs& k) {
  const auto& a = attr<RandomAttrs>(k.attrs, "normal");
  visit_float(a.dtype, "normal", [&]<class T>() {
    set_device(k.out[0]);
    launch_flat(k.out[0].numel(), NormalFn<T>{k.out[0].data<T>(), a.a, a.b, a.seed, a.offset});
  });
}

namespace {
template <bool kRelu> void dropout_of(const KernelArgs& k, const char* op) {
  const auto& a = attr<DropoutAttrs>(k.attrs, op);
  const Tensor x = raw::contiguous(k.in[0]);
  visit_float(x.dtype(), op, [&]<class T>() {
    const T scale = a.p < 1 ? T(1.0 / (1.0 - a.p)) : T(0);
    launch_philox(k.out[0], a.seed, a.offset, DropoutFn<T, kRelu>{x.data<T>(), k.out[0].data<T>(), a.p, scale});
  });
}
}  // namespace

// Input x -> out = x * keep / (1 - p), keep = (u_i >= p). Its own backward (same seed).
void dropout(const KernelArgs& k) { dropout_of<false>(k, "dropout"); }

// Input x -> dropout(relu(x)), the numbers dropout draws.
void relu_dropout(const KernelArgs& k) { dropout_of<true>(k, "relu_dropout"); }

}  // namespace qkv::kernels::cuda
