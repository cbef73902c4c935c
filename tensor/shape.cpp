#include "tensor/shape.h"

#include <algorithm>
#include <ostream>

#include "tensor/error.h"

namespace qkv {

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

Strides contiguous_strides(const Shape& s) {
  Strides st(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    acc *= std::max<int64_t>(s[i], 1);
  }
  return st;
}

std::string shape_str(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}
std::ostream& operator<<(std::ostream& os, const Shape& s) { return os << shape_str(s); }

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  int64_t lo = ndim == 0 ? -1 : -ndim, hi = ndim == 0 ? 0 : ndim - 1;
  if (dim < lo || dim > hi)
    throw IndexError(
        cat(op, ": dim ", dim, " is out of range for a tensor with ", ndim, " dims (expected ", lo, "..", hi, ")"));
  if (ndim == 0) return 0;
  return dim < 0 ? dim + ndim : dim;
}

std::vector<int64_t> normalize_dims(const std::vector<int64_t>& dims, int64_t ndim, const char* op) {
  std::vector<int64_t> out;
  if (dims.empty()) {
    for (int64_t i = 0; i < ndim; ++i) out.push_back(i);
    return out;
  }
  for (int64_t d : dims) out.push_back(wrap_dim(d, ndim, op));
  std::sort(out.begin(), out.end());
  if (std::adjacent_find(out.begin(), out.end()) != out.end())
    throw IndexError(cat(op, ": dim list ", shape_str(dims), " repeats a dim"));
  if (ndim == 0) out.clear();
  return out;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1)
      throw ShapeError(cat(op, ": shapes ", shape_str(a), " and ", shape_str(b), " do not broadcast (dim ", i, ": ", da,
                           " vs ", db, ")"));
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Strides broadcast_strides(const Shape& from, const Strides& from_strides, const Shape& to) {
  Strides st(to.size(), 0);
  size_t off = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i) st[off + i] = from[i] == 1 ? 0 : from_strides[i];
  return st;
}

}  // namespace qkv
