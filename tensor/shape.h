// Shapes and strides (in elements) and the arithmetic on them: element counts, contiguous
// strides, broadcasting, dimension wrapping.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <string>
#include <vector>

namespace qkv {

using Shape = std::vector<int64_t>;
using Strides = std::vector<int64_t>;

int64_t numel(const Shape& s);
Strides contiguous_strides(const Shape& s);
std::string shape_str(const Shape& s);  // "[2, 3]"
std::ostream& operator<<(std::ostream& os, const Shape& s);

// Wraps a possibly negative dim into [0, ndim); throws IndexError naming `op` when out of range.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);
// Normalizes a list of dims (wrapped, sorted, unique); an empty list means all dims.
std::vector<int64_t> normalize_dims(const std::vector<int64_t>& dims, int64_t ndim, const char* op);

// NumPy broadcasting of two shapes; throws ShapeError naming `op` and both shapes.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
// Strides that read a tensor of shape/strides `from` as if it had shape `to` (0 on broadcast dims).
Strides broadcast_strides(const Shape& from, const Strides& from_strides, const Shape& to);

}  // namespace qkv
