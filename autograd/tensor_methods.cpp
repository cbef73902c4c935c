// Tensor's autograd-aware methods: gradients, and the views and conversions that must stay
// differentiable (see the note at the top of tensor/tensor.h).
#include "autograd/dispatch.h"
#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "autograd/views.h"
#include "tensor/view.h"

namespace qkv {

namespace autograd {
void run_backward(const Tensor& root, const Tensor& grad, bool retain_graph);
}

using autograd::record_view;
using autograd::ViewKind;

// ---- gradients --------------------------------------------------------------------------------

bool Tensor::requires_grad() const { return impl().autograd && impl().autograd->requires_grad; }

Tensor& Tensor::set_requires_grad(bool on) {
  auto& meta = impl().autograd;
  if (meta && meta->grad_fn)
    throw AutogradError(
        "set_requires_grad(): only leaf tensors can change requires_grad; this tensor was "
        "computed by op '" +
        meta->grad_fn->name() + "' (use detach() for a new leaf)");
  if (on)
    check<DTypeError>(is_floating(dtype()), "set_requires_grad(): only floating tensors can require grad, got ",
                      dtype_name(dtype()));
  if (!meta) meta = std::make_shared<AutogradMeta>();
  meta->requires_grad = on;
  return *this;
}

bool Tensor::is_leaf() const { return !impl().autograd || !impl().autograd->grad_fn; }

Tensor Tensor::grad() const {
  const auto& meta = impl().autograd;
  return meta && meta->grad ? *meta->grad : Tensor();
}

void Tensor::set_grad(const Tensor& g) {
  if (g.defined())
    check<ShapeError>(g.shape() == shape(), "set_grad(): gradient shape ", shape_str(g.shape()),
                      " does not match the tensor's ", shape_str(shape()));
  auto& meta = impl().autograd;
  if (!meta) meta = std::make_shared<AutogradMeta>();
  meta->grad = g.defined() ? std::make_shared<Tensor>(g) : nullptr;
}

void Tensor::zero_grad() {
  if (impl().autograd) impl().autograd->grad.reset();
}

std::shared_ptr<autograd::Node> Tensor::grad_fn() const { return impl().autograd ? impl().autograd->grad_fn : nullptr; }

void Tensor::backward(const Tensor& gradient, bool retain_graph) const {
  if (!requires_grad())
    throw AutogradError(cat("backward(): this ", autograd::describe(*this),
                            " tensor does not require grad and "
                            "has no grad_fn (mark its inputs with set_requires_grad(), and do not compute it "
                            "under NoGradGuard)"));
  Tensor g = gradient;
  if (!g.defined()) {
    check<ShapeError>(numel() == 1, "backward(): called without a gradient on a tensor of shape ", shape_str(shape()),
                      "; pass a gradient of that shape, or reduce to one element first");
    g = ones(shape(), {dtype(), device()});
  } else {
    check<ShapeError>(g.shape() == shape(), "backward(): gradient shape ", shape_str(g.shape()),
                      " does not match the tensor's ", shape_str(shape()));
    check<DTypeError>(g.dtype() == dtype(), "backward(): gradient dtype ", dtype_name(g.dtype()),
                      " does not match the tensor's ", dtype_name(dtype()));
    g = g.detach().to(device());
  }
  autograd::run_backward(*this, g, retain_graph);
}

Tensor Tensor::detach() const { return raw::as_strided(*this, shape(), strides(), offset()); }

// ---- views ------------------------------------------------------------------------------------

Tensor Tensor::view(const Shape& s) const { return record_view(*this, raw::reshape_view(*this, s), ViewKind::reshape); }

Tensor Tensor::reshape(const Shape& s) const {
  Shape target = raw::infer_shape(s, numel(), "reshape");
  if (raw::view_strides(shape(), strides(), target)) return view(target);
  return contiguous().view(target);
}

Tensor Tensor::flatten(int64_t start, int64_t end) const {
  if (dim() == 0) return reshape({1});
  start = wrap_dim(start, dim(), "flatten");
  end = wrap_dim(end, dim(), "flatten");
  check<ShapeError>(start <= end, "flatten: start dim ", start, " is after end dim ", end);
  Shape s(shape().begin(), shape().begin() + start);
  int64_t n = 1;
  for (int64_t d = start; d <= end; ++d) n *= shape()[size_t(d)];
  s.push_back(n);
  s.insert(s.end(), shape().begin() + end + 1, shape().end());
  return reshape(s);
}

Tensor Tensor::permute(const std::vector<int64_t>& dims) const {
  std::vector<int64_t> wrapped;
  for (int64_t d : dims) wrapped.push_back(wrap_dim(d, dim(), "permute"));
  return record_view(*this, raw::permute(*this, wrapped), ViewKind::permute, {.dims = wrapped});
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  std::vector<int64_t> p(static_cast<size_t>(dim()));
  for (int64_t i = 0; i < dim(); ++i) p[size_t(i)] = i;
  std::swap(p[size_t(wrap_dim(d0, dim(), "transpose"))], p[size_t(wrap_dim(d1, dim(), "transpose"))]);
  return permute(p);
}

Tensor Tensor::slice(int64_t d, int64_t start, int64_t end, int64_t step) const {
  d = wrap_dim(d, dim(), "slice");
  const raw::SliceRange r = raw::normalize_slice(shape()[size_t(d)], start, end);
  return record_view(*this, raw::slice(*this, d, r.start, r.end, step), ViewKind::slice,
                     {.dim = d, .start = r.start, .end = r.end, .step = step});
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  d = wrap_dim(d, dim(), "narrow");
  const int64_t n = shape()[size_t(d)];
  if (start < 0) start += n;
  check<IndexError>(start >= 0 && length >= 0 && start + length <= n, "narrow: range [", start, ", ", start + length,
                    ") is outside dim ", d, " of size ", n);
  return slice(d, start, start + length);
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  d = wrap_dim(d, dim(), "select");
  const int64_t n = shape()[size_t(d)];
  check<IndexError>(index >= -n && index < n, "select: index ", index, " is out of range for dim ", d, " of size ", n);
  if (index < 0) index += n;
  return slice(d, index, index + 1).squeeze(d);
}

Tensor Tensor::expand(const Shape& s) const { return record_view(*this, raw::expand(*this, s), ViewKind::expand); }
Tensor Tensor::squeeze(int64_t d) const { return record_view(*this, raw::squeeze(*this, d), ViewKind::squeeze); }

Tensor Tensor::squeeze() const {
  Shape s;
  for (int64_t v : shape())
    if (v != 1) s.push_back(v);
  return reshape(s);
}

Tensor Tensor::unsqueeze(int64_t d) const { return record_view(*this, raw::unsqueeze(*this, d), ViewKind::unsqueeze); }

// ---- conversions --------------------------------------------------------------------------------

Tensor Tensor::contiguous() const { return is_contiguous() ? *this : qkv::copy(*this); }
Tensor Tensor::clone() const { return qkv::copy(*this); }
Tensor Tensor::to(DType dt) const { return dt == dtype() ? *this : cast(*this, dt); }

Tensor Tensor::to(const Device& d) const {
  if (d == device()) return *this;
  check_device_usable(d, "to");
  return record_view(*this, raw::to(*this, dtype(), d), ViewKind::transfer);
}

// ---- in-place ---------------------------------------------------------------------------------

namespace {
void check_inplace(const Tensor& t, const char* op) {
  if (grad_enabled() && t.requires_grad())
    throw AutogradError(cat(op,
                            ": in-place update of a tensor that requires grad; do it under NoGradGuard "
                            "(optimizer steps) or on a detach()ed tensor"));
}
}  // namespace

Tensor& Tensor::fill_(double value) {
  check_inplace(*this, "fill_");
  raw::fill(*this, value);
  storage()->bump_version();
  return *this;
}

Tensor& Tensor::copy_(const Tensor& src) {
  check_inplace(*this, "copy_");
  raw::copy(*this, src);
  storage()->bump_version();
  return *this;
}

}  // namespace qkv
