// Inference batch norm on the CPU: y = (x - running_mean) / sqrt(running_var + eps) * w + b over
// dim 1 of x [N, C, ...]. The statistics and affine parameters fold into one scale and shift per
// channel, so each [N, C] row of the input is a single vectorized multiply-add.
#include <cmath>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/loops.h"
#include "tensor/view.h"

namespace qkv::kernels::cpu {
namespace {

// The values of a [C] vector, or `fill` repeated C times when it is undefined.
std::vector<double> channel_values(const Tensor& t, int64_t C, double fill) {
  return t.defined() ? t.to_vector<double>() : std::vector<double>(size_t(C), fill);
}

}  // namespace

// Inputs (x, running_mean, running_var, weight?, bias?) -> y.
void batch_norm(const KernelArgs& k) {
  const double eps = attr<BatchNormAttrs>(k.attrs, "batch_norm").eps;
  const Tensor x = raw::contiguous(k.in[0]);
  const int64_t N = x.size(0), C = x.size(1), rows = N * C, inner = rows ? x.numel() / rows : 0;
  const std::vector<double> mean = channel_values(k.in[1], C, 0), var = channel_values(k.in[2], C, 1);
  const std::vector<double> w = channel_values(k.in[3], C, 1), b = channel_values(k.in[4], C, 0);
  visit_float(x.dtype(), "batch_norm", [&]<class T>() {
    std::vector<T> scale(static_cast<size_t>(C)), shift(static_cast<size_t>(C));
    for (size_t c = 0; c < size_t(C); ++c) {
      const double s = w[c] / std::sqrt(var[c] + eps);
      scale[c] = T(s);
      shift[c] = T(b[c] - mean[c] * s);
    }
    const T* xp = x.data<T>();
    T* y = k.out[0].data<T>();
#pragma omp parallel for schedule(static) if (x.numel() >= kParallelGrain)
    for (int64_t r = 0; r < rows; ++r) {
      const size_t c = size_t(r % C);
      ArrMap<T>(y + r * inner, inner) = ConstArrMap<T>(xp + r * inner, inner) * scale[c] + shift[c];
    }
  });
}

}  // namespace qkv::kernels::cpu
