// Element conversion between any two dtypes, identical on host and device: half types go
// through float, conversion to bool tests for non-zero.
#pragma once
#include <cstdint>
#include <type_traits>

#include "tensor/half.h"

namespace qkv {

template <class T> inline constexpr bool is_half_v = std::is_same_v<T, bf16> || std::is_same_v<T, f16>;

template <class D, class S> QKV_HD D convert(S v) {
  if constexpr (std::is_same_v<D, S>) return v;
  else if constexpr (is_half_v<S>) return convert<D>(static_cast<float>(v));
  else if constexpr (is_half_v<D>) return D(static_cast<float>(v));
  else if constexpr (std::is_same_v<D, bool>) return v != S(0);
  else if constexpr (std::is_integral_v<D> && std::is_floating_point_v<S>) {
    // Truncate through int64 (defined for every finite value that fits), then wrap like an
    // integer conversion; NaN becomes 0 and out-of-range values saturate at the int64 limits.
    if (!(v == v)) return D(0);
    if (v >= S(9.2233720368547748e18)) return static_cast<D>(INT64_MAX);
    if (v <= S(-9.2233720368547748e18)) return static_cast<D>(INT64_MIN);
    return static_cast<D>(static_cast<int64_t>(v));
  } else return static_cast<D>(v);
}

}  // namespace qkv
