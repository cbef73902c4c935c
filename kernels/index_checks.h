// Range checks of indices and class targets, run on host arrays before any kernel trusts them
// (the CUDA kernels copy the indices to the host first). The messages are the ones users see,
// identical on both devices.
#pragma once
#include <cstdint>

#include "tensor/error.h"

namespace qkv::kernels {

// Every index in [0, limit): "op: index 7 at position 2 is out of range [0, 5)".
template <class I> void check_indices(const I* idx, int64_t n, int64_t limit, const char* op) {
  for (int64_t i = 0; i < n; ++i)
    if (idx[i] < 0 || idx[i] >= limit)
      throw IndexError(cat(op, ": index ", int64_t(idx[i]), " at position ", i, " is out of range [0, ", limit, ")"));
}

// One index used along `dim` (gather, scatter_add).
inline void check_index_along(int64_t v, int64_t limit, int64_t dim, const char* op) {
  if (v < 0 || v >= limit)
    throw IndexError(cat(op, ": index ", v, " is out of range [0, ", limit, ") along dim ", dim));
}

// Class targets: each in [0, classes) unless it equals ignore_index.
template <class I> void check_targets(const I* t, int64_t rows, int64_t classes, int64_t ignore) {
  for (int64_t r = 0; r < rows; ++r)
    if (t[r] != ignore && (t[r] < 0 || t[r] >= classes))
      throw IndexError(cat("cross_entropy: target ", int64_t(t[r]), " at position ", r, " is out of range for ",
                           classes, " classes (ignore_index is ", ignore, ")"));
}

// Rows whose target is not ignore_index (the denominator of a mean loss).
template <class I> int64_t count_valid(const I* t, int64_t rows, int64_t ignore) {
  int64_t c = 0;
  for (int64_t r = 0; r < rows; ++r) c += t[r] != ignore;
  return c;
}

}  // namespace qkv::kernels
