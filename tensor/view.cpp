#include "tensor/view.h"

#include <algorithm>

namespace qkv::raw {

bool is_contiguous(const Shape& shape, const Strides& strides) {
  int64_t expected = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] == 1) continue;
    if (strides[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

Tensor as_strided(const Tensor& t, const Shape& shape, const Strides& strides, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = t.storage();
  impl->shape = shape;
  impl->strides = strides;
  impl->offset = offset;
  impl->dtype = t.dtype();
  return Tensor(std::move(impl));
}

Shape infer_shape(const Shape& shape, int64_t n, const char* op) {
  Shape out = shape;
  int64_t known = 1;
  int infer_at = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      check<ShapeError>(infer_at < 0, op, ": only one dimension can be -1 in ", shape_str(shape));
      infer_at = int(i);
    } else {
      check<ShapeError>(out[i] >= 0, op, ": invalid size ", out[i], " in ", shape_str(shape));
      known *= out[i];
    }
  }
  if (infer_at >= 0) {
    check<ShapeError>(known != 0 && n % known == 0, op, ": cannot infer -1 in ", shape_str(shape), " for ", n,
                      " elements");
    out[infer_at] = n / known;
  } else {
    check<ShapeError>(known == n, op, ": shape ", shape_str(shape), " has ", known, " elements but the tensor has ", n);
  }
  return out;
}

std::optional<Strides> view_strides(const Shape& old_shape, const Strides& old_strides, const Shape& new_shape) {
  if (old_shape.empty() || numel(old_shape) == 0) return contiguous_strides(new_shape);
  Strides out(new_shape.size());
  int64_t view_d = int64_t(new_shape.size()) - 1;
  int64_t chunk_base = old_strides.back();
  int64_t tensor_n = 1, view_n = 1;
  for (int64_t d = int64_t(old_shape.size()) - 1; d >= 0; --d) {
    tensor_n *= old_shape[d];
    // A chunk ends where the next-outer dim does not continue this one in memory.
    if (d == 0 || (old_shape[d - 1] != 1 && old_strides[d - 1] != tensor_n * chunk_base)) {
      while (view_d >= 0 && (view_n < tensor_n || new_shape[view_d] == 1)) {
        out[view_d] = view_n * chunk_base;
        view_n *= new_shape[view_d];
        --view_d;
      }
      if (view_n != tensor_n) return std::nullopt;
      if (d > 0) {
        chunk_base = old_strides[d - 1];
        tensor_n = view_n = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

Tensor reshape_view(const Tensor& t, const Shape& shape) {
  Shape s = infer_shape(shape, t.numel(), "view");
  auto st = view_strides(t.shape(), t.strides(), s);
  check<ShapeError>(st.has_value(), "view: cannot view a tensor of shape ", shape_str(t.shape()), " with strides ",
                    shape_str(t.strides()), " as ", shape_str(s), " without a copy (use reshape)");
  return as_strided(t, s, *st, t.offset());
}

Tensor as_matrix(const Tensor& t) {
  check<ShapeError>(t.dim() >= 2, "as_matrix: expected at least 2 dims, got ", shape_str(t.shape()));
  if (t.dim() == 2) return t;
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < t.dim(); ++d) rows *= t.shape()[size_t(d)];
  const Shape s{rows, t.shape().back()};
  if (auto st = view_strides(t.shape(), t.strides(), s)) return as_strided(t, s, *st, t.offset());
  return reshape_view(contiguous(t), s);
}

Tensor permute(const Tensor& t, const std::vector<int64_t>& dims) {
  const int64_t n = t.dim();
  check<ShapeError>(int64_t(dims.size()) == n, "permute: got ", dims.size(), " dims ", shape_str(dims),
                    " for a tensor with ", n, " dims");
  Shape s(n);
  Strides st(n);
  std::vector<bool> seen(n, false);
  for (int64_t i = 0; i < n; ++i) {
    int64_t d = wrap_dim(dims[i], n, "permute");
    check<ShapeError>(!seen[d], "permute: dim ", d, " repeats in ", shape_str(dims));
    seen[d] = true;
    s[i] = t.shape()[d];
    st[i] = t.strides()[d];
  }
  return as_strided(t, s, st, t.offset());
}

SliceRange normalize_slice(int64_t n, int64_t start, int64_t end) {
  auto clamp = [n](int64_t i) { return std::clamp<int64_t>(i < 0 ? i + n : i, 0, n); };
  start = clamp(start);
  return {start, std::max(clamp(end), start)};
}

Tensor slice(const Tensor& t, int64_t dim, int64_t start, int64_t end, int64_t step) {
  dim = wrap_dim(dim, t.dim(), "slice");
  check<ValueError>(step > 0, "slice: step must be positive, got ", step);
  const SliceRange r = normalize_slice(t.shape()[dim], start, end);
  start = r.start;
  end = r.end;
  Shape s = t.shape();
  Strides st = t.strides();
  s[dim] = (end - start + step - 1) / step;
  st[dim] = t.strides()[dim] * step;
  return as_strided(t, s, st, t.offset() + start * t.strides()[dim]);
}

Tensor expand(const Tensor& t, const Shape& shape) {
  check<ShapeError>(shape.size() >= t.shape().size(), "expand: cannot expand shape ", shape_str(t.shape()), " to ",
                    shape_str(shape), " (fewer dims)");
  const size_t lead = shape.size() - t.shape().size();
  Shape s(shape.size());
  Strides st(shape.size(), 0);
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i < lead) {
      check<ShapeError>(shape[i] >= 0, "expand: new leading dim ", i, " cannot be ", shape[i]);
      s[i] = shape[i];
      continue;
    }
    int64_t have = t.shape()[i - lead];
    int64_t want = shape[i] == -1 ? have : shape[i];
    check<ShapeError>(want == have || have == 1, "expand: cannot expand shape ", shape_str(t.shape()), " to ",
                      shape_str(shape), " (dim ", i, ": ", have, " vs ", want, ")");
    s[i] = want;
    st[i] = want == have ? t.strides()[i - lead] : 0;
  }
  return as_strided(t, s, st, t.offset());
}

Tensor squeeze(const Tensor& t, int64_t dim) {
  dim = wrap_dim(dim, t.dim(), "squeeze");
  if (t.dim() == 0 || t.shape()[dim] != 1) return as_strided(t, t.shape(), t.strides(), t.offset());
  Shape s = t.shape();
  Strides st = t.strides();
  s.erase(s.begin() + dim);
  st.erase(st.begin() + dim);
  return as_strided(t, s, st, t.offset());
}

Tensor unsqueeze(const Tensor& t, int64_t dim) {
  dim = wrap_dim(dim, t.dim() + 1, "unsqueeze");
  Shape s = t.shape();
  Strides st = t.strides();
  int64_t stride = dim < t.dim() ? t.shape()[dim] * t.strides()[dim] : 1;
  s.insert(s.begin() + dim, 1);
  st.insert(st.begin() + dim, stride);
  return as_strided(t, s, st, t.offset());
}

Tensor contiguous(const Tensor& t) {
  if (t.is_contiguous()) return t;
  Tensor out = empty(t.shape(), {t.dtype(), t.device()});
  copy(out, t);
  return out;
}

Tensor to(const Tensor& t, DType dtype, Device device) {
  if (t.dtype() == dtype && t.device() == device) return t;
  Tensor out = empty(t.shape(), {dtype, device});
  copy(out, t);
  return out;
}

}  // namespace qkv::raw
