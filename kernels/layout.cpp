#include "kernels/layout.h"

namespace qkv::kernels {

ReduceLayout reduce_layout(const Tensor& x, const std::vector<int64_t>& dims) {
  ReduceLayout r;
  const int64_t nd = x.dim();
  const bool block = !dims.empty() && dims.back() - dims.front() + 1 == int64_t(dims.size());
  if (block && x.is_contiguous()) {
    r.x = x;
    for (int64_t d = 0; d < nd; ++d) {
      const int64_t s = x.shape()[size_t(d)];
      if (d < dims.front()) r.outer *= s;
      else if (d <= dims.back()) r.reduced *= s;
      else r.inner *= s;
    }
    return r;
  }
  // Kept dims first, reduced dims last, then one copy.
  std::vector<int64_t> perm;
  std::vector<bool> reduced(static_cast<size_t>(nd), false);
  for (int64_t d : dims) reduced[size_t(d)] = true;
  for (int64_t d = 0; d < nd; ++d)
    if (!reduced[size_t(d)]) {
      perm.push_back(d);
      r.outer *= x.shape()[size_t(d)];
    }
  for (int64_t d : dims) {
    perm.push_back(d);
    r.reduced *= x.shape()[size_t(d)];
  }
  r.x = raw::contiguous(raw::permute(x, perm));
  return r;
}

void check_reducible(const ReduceLayout& L, const char* op, const Tensor& x) {
  check<ShapeError>(L.reduced > 0 || L.outer * L.inner == 0, op,
                    ": cannot reduce over an empty dim of a tensor of shape ", shape_str(x.shape()));
}

Around::Around(const Shape& s, int64_t dim) {
  for (int64_t d = 0; d < int64_t(s.size()); ++d) {
    if (d < dim) outer *= s[size_t(d)];
    else if (d == dim) size = s[size_t(d)];
    else inner *= s[size_t(d)];
  }
}

RowView::RowView(const Tensor& t, int64_t dim) {
  const int64_t nd = t.dim();
  for (int64_t d = 0; d < nd; ++d)
    if (d != dim) perm.push_back(d);
  if (nd > 0) perm.push_back(dim);
  moved = nd > 0 && dim != nd - 1;
  x = raw::contiguous(moved ? raw::permute(t, perm) : t);
  n = nd == 0 ? 1 : x.shape().back();
  rows = n == 0 ? 0 : x.numel() / n;
}

Tensor RowView::result_buffer(const Tensor& out) const {
  return moved ? empty(x.shape(), {out.dtype(), out.device()}) : out;
}

void RowView::write_back(const Tensor& buffer, const Tensor& out) const {
  if (!moved) return;
  std::vector<int64_t> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inverse[size_t(perm[i])] = int64_t(i);
  raw::copy(out, raw::permute(buffer, inverse));
}

bool same_view(const Tensor& a, const Tensor& b) {
  return a.raw_data() == b.raw_data() && a.shape() == b.shape() && a.strides() == b.strides() && a.dtype() == b.dtype();
}

}  // namespace qkv::kernels
