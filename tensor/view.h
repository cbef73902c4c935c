// Raw strided views and copies: they never record autograd history. Kernels and the
// differentiable Tensor methods (autograd/tensor_methods.cpp) are built on these.
#pragma once
#include <optional>
#include <vector>

#include "tensor/tensor.h"

namespace qkv::raw {

// A new handle on t's storage with the given geometry (no bounds check beyond the storage size).
Tensor as_strided(const Tensor& t, const Shape& shape, const Strides& strides, int64_t offset);
// Resolves one -1 in `shape` against numel; throws ShapeError naming `op` if it cannot.
Shape infer_shape(const Shape& shape, int64_t numel, const char* op);
// Strides for viewing (shape, strides) as new_shape without a copy, if possible.
std::optional<Strides> view_strides(const Shape& shape, const Strides& strides, const Shape& new_shape);

// Python-style bounds (negative counts from the end) clamped to [0, n], with end >= start.
struct SliceRange {
  int64_t start, end;
};
SliceRange normalize_slice(int64_t n, int64_t start, int64_t end);

Tensor reshape_view(const Tensor& t, const Shape& shape);  // throws if a copy would be needed
// t [..., C] (at least 2-D) as [N, C], N the product of the leading dims: a view where the
// strides allow one, else a contiguous copy (what a kernel reading rows of x [..., K] wants).
Tensor as_matrix(const Tensor& t);
Tensor permute(const Tensor& t, const std::vector<int64_t>& dims);
Tensor slice(const Tensor& t, int64_t dim, int64_t start, int64_t end, int64_t step);
Tensor expand(const Tensor& t, const Shape& shape);
Tensor squeeze(const Tensor& t, int64_t dim);
Tensor unsqueeze(const Tensor& t, int64_t dim);

// Copies src into dst elementwise: src broadcasts to dst's shape, its dtype is converted, and
// either may live on any device. dst may be a strided view.
void copy(const Tensor& dst, const Tensor& src);
Tensor contiguous(const Tensor& t);  // t itself when already contiguous
Tensor to(const Tensor& t, DType dtype, Device device);
void fill(const Tensor& t, double value);

// Whether the tensor's elements, walked in logical order, are exactly its storage range.
bool is_contiguous(const Shape& shape, const Strides& strides);

}  // namespace qkv::raw
