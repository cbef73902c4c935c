// Host-side arrangement shared by the CPU and CUDA kernels: how a reduction, a row-wise op or an
// indexed op sees its input. Everything here only permutes and copies through raw::, so it works
// for tensors on any device.
#pragma once
#include <vector>

#include "tensor/view.h"

namespace qkv::kernels {

// x arranged so that the reduced dims form the middle block of a contiguous tensor, read as
// [outer, reduced, inner]. Copies only when the reduced dims are not one contiguous block.
struct ReduceLayout {
  Tensor x;
  int64_t outer = 1, reduced = 1, inner = 1;
};
ReduceLayout reduce_layout(const Tensor& x, const std::vector<int64_t>& dims);  // dims sorted, unique
// Throws ShapeError naming `op` for a max-like reduction over an empty dim (it has no value).
void check_reducible(const ReduceLayout& L, const char* op, const Tensor& x);

// [outer, size, inner] of a contiguous tensor of `shape` around `dim`.
struct Around {
  int64_t outer = 1, size = 1, inner = 1;
  Around(const Shape& shape, int64_t dim);
};

// A contiguous [rows, n] view with `dim` moved last, for row-wise kernels (softmax), and the way
// back for their results.
struct RowView {
  Tensor x;  // contiguous, `dim` last
  int64_t rows = 0, n = 0;
  std::vector<int64_t> perm;  // permutation applied
  bool moved = false;         // false when dim was already last

  RowView(const Tensor& t, int64_t dim);
  // Where to compute a result destined for `out`: out itself, or a buffer laid out like x.
  Tensor result_buffer(const Tensor& out) const;
  // Copies a result_buffer into out (nothing to do when the buffer is out).
  void write_back(const Tensor& buffer, const Tensor& out) const;
};

// Whether a and b are one view passed twice (K=V: keys and values one tensor): the same element
// 0, shape, strides and dtype. Kernels then load it once for both roles.
bool same_view(const Tensor& a, const Tensor& b);

}  // namespace qkv::kernels
