// Range checks of indices and class targets on host arrays, before a CPU kernel trusts them.
// The messages (tensor/index_errors.h) are the ones the CUDA kernels raise from the device.
#pragma once
#include <cstdint>

#include "tensor/index_errors.h"

namespace qkv::kernels {

// Every index in [0, limit).
template <class I> void check_indices(const I* idx, int64_t n, int64_t limit, const char* op) {
  for (int64_t i = 0; i < n; ++i)
    if (idx[i] < 0 || idx[i] >= limit) throw index_out_of_range(op, int64_t(idx[i]), i, limit);
}

// One index used along `dim` (gather, scatter_add).
inline void check_index_along(int64_t v, int64_t limit, int64_t dim, const char* op) {
  if (v < 0 || v >= limit) throw index_out_of_range_along(op, v, limit, dim);
}

// Class targets: each in [0, classes) unless it equals ignore_index.
template <class I> void check_targets(const I* t, int64_t rows, int64_t classes, int64_t ignore) {
  for (int64_t r = 0; r < rows; ++r)
    if (t[r] != ignore && (t[r] < 0 || t[r] >= classes)) throw target_out_of_range(int64_t(t[r]), r, classes, ignore);
}

// Rows whose target is not ignore_index (the denominator of a mean loss).
template <class I> int64_t count_valid(const I* t, int64_t rows, int64_t ignore) {
  int64_t c = 0;
  for (int64_t r = 0; r < rows; ++r) c += t[r] != ignore;
  return c;
}

}  // namespace qkv::kernels
