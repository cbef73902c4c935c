// One row of the CPU layer norm, shared by layer_norm and dropout_add_layer_norm so that the
// fused op's rows are the unfused op's, bit for bit.
#pragma once
#include <cmath>

#include "kernels/cpu/loops.h"

namespace qkv::kernels::cpu {

// y = (x - mean) * rstd, times w and plus b where given; returns mean and rstd (1 / std).
template <class T>
void layer_norm_row(const T* x, T* y, int64_t n, double eps, const T* w, const T* b, T& mean, T& rstd) {
  ConstArrMap<T> xr(x, n);
  ArrMap<T> yr(y, n);
  const T mu = xr.mean();
  const T var = (xr - mu).square().mean();
  const T rs = T(1) / std::sqrt(var + T(eps));
  mean = mu;
  rstd = rs;
  yr = (xr - mu) * rs;
  if (w) yr *= ConstArrMap<T>(w, n);
  if (b) yr += ConstArrMap<T>(b, n);
}

}  // namespace qkv::kernels::cpu
