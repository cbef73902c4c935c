// The IndexError messages of out-of-range indices and class targets. Kernels on every device
// raise them with these words (CPU kernels at once; CUDA kernels record the bad value on the
// device and the host raises it at the next synchronisation), so users see one message.
#pragma once
#include <cstdint>

#include "tensor/error.h"

namespace qkv {

// "op: index 7 at position 2 is out of range [0, 5)"
inline IndexError index_out_of_range(const char* op, int64_t value, int64_t position, int64_t limit) {
  return IndexError(cat(op, ": index ", value, " at position ", position, " is out of range [0, ", limit, ")"));
}
// gather / scatter_add: "op: index 7 is out of range [0, 5) along dim 1"
inline IndexError index_out_of_range_along(const char* op, int64_t value, int64_t limit, int64_t dim) {
  return IndexError(cat(op, ": index ", value, " is out of range [0, ", limit, ") along dim ", dim));
}
inline IndexError target_out_of_range(int64_t value, int64_t position, int64_t classes, int64_t ignore_index) {
  return IndexError(cat("cross_entropy: target ", value, " at position ", position, " is out of range for ", classes,
                        " classes (ignore_index is ", ignore_index, ")"));
}

}  // namespace qkv
