// Optimizer CUDA kernels: adam_update, sgd_update (in place, over groups of tensors) and
// clip_grad_norm, with the semantics and per-element arithmetic of kernels/cpu/optim.cpp.
//
// Multi-tensor apply: a call's tensors (one group = one "tensor" of the list, with Depth
// pointers: Adam's p, g, m, v; SGD's p, g, buf; clip's g) are packed into a TensorList passed by
// value (under the classic 4 KB parameter limit). Each tensor is cut into chunks of kChunk
// elements, one block per chunk; first_chunk[] (a prefix sum over the list) maps block b to the
// tensor s with first_chunk[s] <= b < first_chunk[s + 1] and to its chunk b - first_chunk[s].
// A launch holds at most kMaxTensors tensors, all of one dtype; longer lists (or mixed dtypes)
// take several launches. Empty tensors get no chunk and are left out.
//
// The step's scalars are computed on the host in double exactly as the CPU does, cast to T and
// passed as kernel arguments. The element updates use the _rn intrinsics so that nvcc cannot
// fuse a * b + c into an FMA: every operation rounds as in the CPU loop (the GPU check's CPU
// build, without -march=native, has no FMA either).
//
// clip_grad_norm stays on the device: each block writes the double sum of squares of its chunk
// to partial[slot], slot = the chunk's index in the whole call (launches and dtypes in a fixed
// order); one single-block kernel adds the partials in a fixed order (each thread a strided
// run in order, then the block's fixed-order tree), independent of timing, and writes the norm;
// a last multi-tensor kernel reads the norm and scales the grads when the CPU's rule says so.
#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/multi_tensor.h"
#include "tensor/view.h"

namespace qkv::kernels::cuda {
namespace {

constexpr int kOptimThreads = 256;  // threads per block (a multiple of 32, for block_reduce)
// Kernels take the TensorList as `const __grid_constant__`: indexed by a runtime slot, a plain
// by-value parameter would be copied into each thread's local memory first.

template <class T> T* ptr_or_null(const Tensor& t) { return t.defined() ? t.data<T>() : nullptr; }

// ---- rounding-exact arithmetic (no FMA contraction) ------------------------------------------

__device__ __forceinline__ float add_(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double add_(double a, double b) { return __dadd_rn(a, b); }
__device__ __forceinline__ float sub_(float a, float b) { return __fsub_rn(a, b); }
__device__ __forceinline__ double sub_(double a, double b) { return __dsub_rn(a, b); }
__device__ __forceinline__ float mul_(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double mul_(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ float div_(float a, float b) { return __fdiv_rn(a, b); }
__device__ __forceinline__ double div_(double a, double b) { return __ddiv_rn(a, b); }
__device__ __forceinline__ float sqrt_rn(float a) { return __fsqrt_rn(a); }
__device__ __forceinline__ double sqrt_rn(double a) { return __dsqrt_rn(a); }

// ---- adam_update ----------------------------------------------------------------------------

// As kernels/cpu/optim.cpp's adam_coefficients, already cast to T.
template <class T> struct AdamScalars {
  T b1, a1, b2, a2, l2, decay, bc2_sqrt, step_size, eps;
  bool use_l2, use_decay;
};

template <class T> AdamScalars<T> adam_scalars(const AdamAttrs& a) {
  const double t = double(a.step);
  const double l2 = a.decoupled ? 0.0 : a.weight_decay;
  const double decay = a.decoupled ? 1 - a.lr * a.weight_decay : 1.0;
  const double bc2_sqrt = std::sqrt(1 - std::pow(a.beta2, t));
  const double step_size = a.lr / (1 - std::pow(a.beta1, t));
  return {T(a.beta1),  T(1 - a.beta1), T(a.beta2), T(1 - a.beta2), T(l2),     T(decay),
          T(bc2_sqrt), T(step_size),   T(a.eps),   l2 != 0,        decay != 1};
}

// Groups (p, g, m, v); g only read.
template <class T> __global__ void adam_kernel(const __grid_constant__ TensorList<T, 4> l, const AdamScalars<T> c) {
  int64_t begin, end;
  const int s = locate(l, blockIdx.x, begin, end);
  T* p = l.ptr[0][s];
  const T* g = l.ptr[1][s];
  T* m = l.ptr[2][s];
  T* v = l.ptr[3][s];
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const T pi0 = p[i];
    const T gi = c.use_l2 ? add_(g[i], mul_(c.l2, pi0)) : g[i];
    const T pi = c.use_decay ? mul_(pi0, c.decay) : pi0;
    const T mi = add_(mul_(c.b1, m[i]), mul_(c.a1, gi));
    const T vi = add_(mul_(c.b2, v[i]), mul_(mul_(c.a2, gi), gi));
    m[i] = mi;
    v[i] = vi;
    const T denom = add_(div_(sqrt_rn(vi), c.bc2_sqrt), c.eps);
    p[i] = sub_(pi, mul_(c.step_size, div_(mi, denom)));
  }
}

// ---- sgd_update -----------------------------------------------------------------------------

template <class T> struct SgdScalars {
  T lr, mom, wd;
  bool use_wd, use_mom, nesterov, first;
};

// Groups (p, g, buf); g only read, buf null (and unused) without momentum.
template <class T> __global__ void sgd_kernel(const __grid_constant__ TensorList<T, 3> l, const SgdScalars<T> c) {
  int64_t begin, end;
  const int s = locate(l, blockIdx.x, begin, end);
  T* p = l.ptr[0][s];
  const T* g = l.ptr[1][s];
  T* buf = l.ptr[2][s];
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const T pi = p[i];
    T d = c.use_wd ? add_(g[i], mul_(c.wd, pi)) : g[i];
    if (c.use_mom) {
      const T b = c.first ? d : add_(mul_(c.mom, buf[i]), d);
      buf[i] = b;
      d = c.nesterov ? add_(d, mul_(c.mom, b)) : b;
    }
    p[i] = sub_(pi, mul_(c.lr, d));
  }
}

// Splits groups of `depth` inputs by dtype and runs `kernel` over each dtype's groups.
// Input 1 of each group (the grad) is read through a contiguous copy.
template <int Depth, class Launch> void multi_tensor_update(const KernelArgs& k, const char* op, Launch launch) {
  const size_t groups = k.in.size() / Depth;
  if (groups == 0) return;
  set_device(k.in[0]);
  std::vector<Tensor> grads(groups);  // kept alive until every launch is queued
  for (size_t i = 0; i < groups; ++i) grads[i] = raw::contiguous(k.in[i * Depth + 1]);
  for (DType dt : {DType::f32, DType::f64}) {
    visit_float(dt, op, [&]<class T>() {
      std::vector<std::array<T*, Depth>> ptrs;
      std::vector<int64_t> numels;
      for (size_t i = 0; i < groups; ++i) {
        const Tensor* t = &k.in[i * Depth];
        if (t[0].dtype() != dt) continue;
        std::array<T*, Depth> row;
        for (int d = 0; d < Depth; ++d) row[size_t(d)] = d == 1 ? grads[i].data<T>() : ptr_or_null<T>(t[d]);
        ptrs.push_back(row);
        numels.push_back(t[0].numel());
      }
      for_each_list<T, Depth>(ptrs, numels, 0,
                              [&](const TensorList<T, Depth>& l, int64_t blocks, int64_t) { launch(l, blocks); });
    });
  }
}

// ---- clip_grad_norm -------------------------------------------------------------------------

// partial[b] = sum over this block's chunk of double(g)^2.
template <class T> __global__ void sum_squares_kernel(const __grid_constant__ TensorList<T, 1> l, double* partial) {
  QKV_SHARED(double, smem, [kWarp]);
  int64_t begin, end;
  const int s = locate(l, blockIdx.x, begin, end);
  const T* g = l.ptr[0][s];
  double acc = 0;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const double x = double(g[i]);
    acc = __dadd_rn(acc, __dmul_rn(x, x));
  }
  acc = block_reduce(acc, SumOp{}, smem);
  if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

// One block: *norm = sqrt(sum of the n partials) * unscale, added in a fixed order.
__global__ void norm_kernel(const double* partial, int64_t n, double unscale, double* norm) {
  QKV_SHARED(double, smem, [kWarp]);
  double acc = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) acc = __dadd_rn(acc, partial[i]);
  acc = block_reduce(acc, SumOp{}, smem);
  if (threadIdx.x == 0) *norm = __dmul_rn(__dsqrt_rn(acc), unscale);
}

// The CPU's rule: nothing when the norm is not finite or the factor unscale * min(1, max_norm /
// (norm + 1e-6)) is 1, else g = g * T(factor).
template <class T>
__global__ void scale_kernel(const __grid_constant__ TensorList<T, 1> l, const double* norm, double max_norm,
                             double unscale) {
  const double n = *norm;
  if (!isfinite(n)) return;
  const double factor = __dmul_rn(unscale, fmin(1.0, __ddiv_rn(max_norm, __dadd_rn(n, 1e-6))));
  if (factor == 1) return;
  const T f = T(factor);
  int64_t begin, end;
  const int s = locate(l, blockIdx.x, begin, end);
  T* g = l.ptr[0][s];
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) g[i] = mul_(g[i], f);
}

// Runs fn(ptrs, numels) with the grads of one dtype at a time (f32, then f64), in input order.
template <class F> void for_each_dtype(std::span<const Tensor> grads, F&& fn) {
  for (DType dt : {DType::f32, DType::f64}) {
    visit_float(dt, "clip_grad_norm", [&]<class T>() {
      std::vector<std::array<T*, 1>> ptrs;
      std::vector<int64_t> numels;
      for (const Tensor& g : grads) {
        if (g.dtype() != dt) continue;
        ptrs.push_back({g.data<T>()});
        numels.push_back(g.numel());
      }
      fn(ptrs, numels);
    });
  }
}

}  // namespace

// Groups of (param, grad, exp_avg, exp_avg_sq).
void adam_update(const KernelArgs& k) {
  const AdamAttrs& a = attr<AdamAttrs>(k.attrs, "adam_update");
  multi_tensor_update<4>(k, "adam_update", [&]<class T>(const TensorList<T, 4>& l, int64_t blocks) {
    QKV_LAUNCH(unsigned(blocks), kOptimThreads, 0, launch_stream(), adam_kernel<T>)(l, adam_scalars<T>(a));
    QKV_CUDA_LAUNCH_CHECK();
  });
}

// Groups of (param, grad, momentum_buffer); the buffer is undefined when momentum is 0.
void sgd_update(const KernelArgs& k) {
  const SgdAttrs& a = attr<SgdAttrs>(k.attrs, "sgd_update");
  multi_tensor_update<3>(k, "sgd_update", [&]<class T>(const TensorList<T, 3>& l, int64_t blocks) {
    const SgdScalars<T> c{T(a.lr),    T(a.momentum), T(a.weight_decay), a.weight_decay != 0, a.momentum != 0,
                          a.nesterov, a.first};
    QKV_LAUNCH(unsigned(blocks), kOptimThreads, 0, launch_stream(), sgd_kernel<T>)(l, c);
    QKV_CUDA_LAUNCH_CHECK();
  });
}

// One grad per group (contiguous, written); out[0] is the 0-dim float64 norm, left on the device.
void clip_grad_norm(const KernelArgs& k) {
  const ClipAttrs& a = attr<ClipAttrs>(k.attrs, "clip_grad_norm");
  double* norm = k.out[0].data<double>();
  set_device(k.out[0]);
  int64_t slots = 0;
  for (const Tensor& g : k.in) slots += (g.numel() + kChunk - 1) / kChunk;
  const Tensor partial = empty({std::max<int64_t>(slots, 1)}, {DType::f64, k.out[0].device()});
  double* pp = partial.data<double>();
  int64_t first_slot = 0;
  for_each_dtype(k.in, [&]<class T>(const std::vector<std::array<T*, 1>>& ptrs, const std::vector<int64_t>& numels) {
    first_slot +=
        for_each_list<T, 1>(ptrs, numels, first_slot, [&](const TensorList<T, 1>& l, int64_t blocks, int64_t slot) {
          QKV_LAUNCH(unsigned(blocks), kOptimThreads, 0, launch_stream(), sum_squares_kernel<T>)(l, pp + slot);
          QKV_CUDA_LAUNCH_CHECK();
        });
  });
  QKV_LAUNCH(1, kOptimThreads, 0, launch_stream(), norm_kernel)(pp, first_slot, a.unscale, norm);
  QKV_CUDA_LAUNCH_CHECK();
  if (std::isinf(a.max_norm) && a.unscale == 1) return;  // the factor would be 1: only measures
  for_each_dtype(k.in, [&]<class T>(const std::vector<std::array<T*, 1>>& ptrs, const std::vector<int64_t>& numels) {
    for_each_list<T, 1>(ptrs, numels, 0, [&](const TensorList<T, 1>& l, int64_t blocks, int64_t) {
      QKV_LAUNCH(unsigned(blocks), kOptimThreads, 0, launch_stream(), scale_kernel<T>)(l, norm, a.max_norm, a.unscale);
      QKV_CUDA_LAUNCH_CHECK();
    });
  });
}

}  // namespace qkv::kernels::cuda
