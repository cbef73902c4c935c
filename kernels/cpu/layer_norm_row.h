// One row of the CPU layer norm and RMS norm, shared by the plain and the fused residual kernels
// (layer_norm, rms_norm, dropout_add_layer_norm, dropout_add_rms_norm) so that a fused op's rows
// are the unfused op's, bit for bit.
#pragma once
#include <cmath>

#include "kernels/cpu/loops.h"

namespace qkv::kernels::cpu {

// kCentered (layer norm): y = (x - mean) * rstd, rstd = 1 / sqrt(var + eps), var the biased
// variance; else (RMS norm): y = x * rstd, rstd = 1 / sqrt(mean(x^2) + eps), mean left alone.
// Then times w and plus b where given.
template <bool kCentered, class T>
void norm_row(const T* x, T* y, int64_t n, double eps, const T* w, const T* b, T& mean, T& rstd) {
  ConstArrMap<T> xr(x, n);
  ArrMap<T> yr(y, n);
  const T mu = kCentered ? xr.mean() : T(0);
  const T var = kCentered ? (xr - mu).square().mean() : xr.square().mean();
  const T rs = T(1) / std::sqrt(var + T(eps));
  if (kCentered) mean = mu;
  rstd = rs;
  if (kCentered) yr = (xr - mu) * rs;
  else yr = xr * rs;
  if (w) yr *= ConstArrMap<T>(w, n);
  if (b) yr += ConstArrMap<T>(b, n);
}

}  // namespace qkv::kernels::cpu
