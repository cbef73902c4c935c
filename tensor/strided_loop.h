// Walks N operands of one logical shape with their own strides, as rows of an inner loop.
// Adjacent dims that every operand can walk as one are merged first, so a contiguous tensor
// is a single row and a transposed one a set of strided rows. Rows are split across OpenMP
// threads when the work is large enough to pay for it.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <omp.h>

#include "tensor/error.h"
#include "tensor/shape.h"

namespace qkv {

template <size_t N> struct StridedLoop {
  Shape shape;                     // merged shape; never empty (a scalar is [1])
  std::array<Strides, N> strides;  // per operand, in elements

  int64_t inner() const { return shape.back(); }
  int64_t rows() const {
    int64_t r = 1;
    for (size_t d = 0; d + 1 < shape.size(); ++d) r *= shape[d];
    return r;
  }
  std::array<int64_t, N> inner_strides() const {
    std::array<int64_t, N> s;
    for (size_t k = 0; k < N; ++k) s[k] = strides[k].back();
    return s;
  }
};

template <size_t N> StridedLoop<N> make_strided_loop(const Shape& shape, const std::array<Strides, N>& strides) {
  StridedLoop<N> L;
  // Drop size-1 dims, then merge dim i into i+1 when every operand steps through them evenly.
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    bool merge = !L.shape.empty();
    for (size_t k = 0; k < N && merge; ++k) merge = L.strides[k].back() == strides[k][d] * shape[d];
    if (merge) {
      L.shape.back() *= shape[d];
      for (size_t k = 0; k < N; ++k) L.strides[k].back() = strides[k][d];
    } else {
      L.shape.push_back(shape[d]);
      for (size_t k = 0; k < N; ++k) L.strides[k].push_back(strides[k][d]);
    }
  }
  check<ShapeError>(L.shape.size() <= 16, "tensors with more than 16 non-trivial dims are not supported");
  if (L.shape.empty()) {
    L.shape.push_back(1);
    for (size_t k = 0; k < N; ++k) L.strides[k].push_back(1);
  }
  return L;
}

// Calls f(offsets, n) for every row: offsets[k] is operand k's element offset of the row start,
// n the row length. `min_parallel` is the element count below which it runs on one thread.
template <size_t N, class F> void for_each_row(const StridedLoop<N>& L, int64_t min_parallel, F&& f) {
  const int64_t rows = L.rows(), inner = L.inner();
  const int nd = int(L.shape.size()) - 1;  // outer dims
  auto run = [&](int64_t r0, int64_t r1) {
    if (r0 >= r1) return;
    // Decompose r0 into an outer index, then step it like an odometer.
    std::array<int64_t, 16> idx{};
    std::array<int64_t, N> off{};
    int64_t r = r0;
    for (int d = nd - 1; d >= 0; --d) {
      idx[d] = r % L.shape[d];
      r /= L.shape[d];
      for (size_t k = 0; k < N; ++k) off[k] += idx[d] * L.strides[k][d];
    }
    for (int64_t row = r0; row < r1; ++row) {
      f(off, inner);
      for (int d = nd - 1; d >= 0; --d) {
        for (size_t k = 0; k < N; ++k) off[k] += L.strides[k][d];
        if (++idx[d] < L.shape[d]) break;
        for (size_t k = 0; k < N; ++k) off[k] -= L.shape[d] * L.strides[k][d];
        idx[d] = 0;
      }
    }
  };
  const int64_t total = rows * inner;
  const int threads = omp_get_max_threads();
  if (total < min_parallel || threads == 1 || omp_in_parallel()) {
    if (rows == 1) {
      f(std::array<int64_t, N>{}, inner);
      return;
    }
    run(0, rows);
    return;
  }
  if (rows == 1) {
    // One long row: split it into chunks, each a row of its own.
    const int64_t chunk = (inner + threads - 1) / threads;
#pragma omp parallel for schedule(static)
    for (int t = 0; t < threads; ++t) {
      int64_t b = t * chunk, e = std::min<int64_t>(inner, b + chunk);
      if (b >= e) continue;
      std::array<int64_t, N> off;
      for (size_t k = 0; k < N; ++k) off[k] = b * L.strides[k][0];
      f(off, e - b);
    }
    return;
  }
#pragma omp parallel
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int64_t per = (rows + nt - 1) / nt;
    run(t * per, std::min<int64_t>(rows, (t + 1) * per));
  }
}

}  // namespace qkv
