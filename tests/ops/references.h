// Small helpers the naive references are written with: elementwise maps with broadcasting and
// reductions over a dim list, all on Ref (dense double arrays).
#pragma once
#include <cmath>

#include "tests/ops/harness.h"

namespace qkv::test {

template <class F> Ref map1(const Ref& x, F f) {
  Ref r(x.shape);
  for (size_t i = 0; i < x.v.size(); ++i) r.v[i] = f(x.v[i]);
  return r;
}

template <class F> Ref map2(const Ref& a, const Ref& b, F f) {
  Ref r(broadcast(a.shape, b.shape));
  for_each_index(r.shape, [&](const std::vector<int64_t>& i) { r.at(i) = f(a.bcast(i), b.bcast(i)); });
  return r;
}

// The output index of reducing `idx` over `dims` (keepdim keeps size-1 dims).
inline std::vector<int64_t> reduced_index(const std::vector<int64_t>& idx, const std::vector<int64_t>& dims,
                                          bool keepdim) {
  std::vector<int64_t> out;
  for (int64_t d = 0; d < int64_t(idx.size()); ++d) {
    bool red = std::find(dims.begin(), dims.end(), d) != dims.end();
    if (!red) out.push_back(idx[size_t(d)]);
    else if (keepdim) out.push_back(0);
  }
  return out;
}
inline Shape reduced_shape(const Shape& s, const std::vector<int64_t>& dims, bool keepdim) {
  Shape out;
  for (int64_t d = 0; d < int64_t(s.size()); ++d) {
    bool red = std::find(dims.begin(), dims.end(), d) != dims.end();
    if (!red) out.push_back(s[size_t(d)]);
    else if (keepdim) out.push_back(1);
  }
  return out;
}

// Moves a row-major index's `dim` coordinate: the index of element j along dim.
inline std::vector<int64_t> with_coord(std::vector<int64_t> idx, int64_t dim, int64_t j) {
  idx[size_t(dim)] = j;
  return idx;
}

inline double gelu_exact(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
inline double gelu_tanh(double x) {
  const double c = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1 + std::tanh(c * (x + 0.044715 * x * x * x)));
}

}  // namespace qkv::test
