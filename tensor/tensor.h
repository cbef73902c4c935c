// qkvlab's tensor layer (tensor/): the Tensor handle, dtypes, devices, shapes, the caching
// allocators, strided views, copies and casts, the Philox generator and safetensors I/O.
//
// A Tensor is a cheap handle: shared storage + shape + strides + offset + dtype. Copying a Tensor
// copies the handle, never the data. Views (reshape, permute, slice, expand, ...) share storage.
// The view and conversion methods below are differentiable: they are implemented in autograd/
// (autograd/tensor_methods.cpp) on top of the raw views in tensor/view.h, so gradients flow
// through them. Arithmetic lives in autograd/ops.h.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "tensor/device.h"
#include "tensor/dtype.h"
#include "tensor/error.h"
#include "tensor/shape.h"
#include "tensor/storage.h"

namespace qkv {

namespace autograd {
struct Node;
}
class Tensor;

// What autograd keeps on a tensor: created only for tensors that take part in differentiation.
struct AutogradMeta {
  bool requires_grad = false;
  std::shared_ptr<Tensor> grad;                    // accumulated gradient of a leaf
  std::shared_ptr<autograd::Node> grad_fn;         // the op that produced this tensor (non-leaf)
  int output_nr = 0;                               // which output of grad_fn this tensor is
  std::weak_ptr<autograd::Node> grad_accumulator;  // a leaf's AccumulateGrad, shared by its uses
};

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape shape;
  Strides strides;
  int64_t offset = 0;  // in elements
  DType dtype = DType::f32;
  std::shared_ptr<AutogradMeta> autograd;  // null for tensors outside any graph
};

struct TensorOptions {
  DType dtype = DType::f32;
  Device device = kCPU;
  TensorOptions() = default;
  TensorOptions(DType d) : dtype(d) {}
  TensorOptions(Device dev) : device(dev) {}
  TensorOptions(DType d, Device dev) : dtype(d), device(dev) {}
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // ---- metadata ------------------------------------------------------------------------
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl().shape; }
  const Strides& strides() const { return impl().strides; }
  int64_t dim() const { return int64_t(impl().shape.size()); }
  int64_t size(int64_t d) const;  // negative d counts from the end
  int64_t stride(int64_t d) const;
  int64_t numel() const { return qkv::numel(impl().shape); }
  int64_t offset() const { return impl().offset; }
  DType dtype() const { return impl().dtype; }
  Device device() const { return impl().storage->device(); }
  size_t element_size() const { return dtype_size(dtype()); }
  size_t nbytes() const { return size_t(numel()) * element_size(); }
  bool is_contiguous() const;
  bool is_cuda() const { return device().is_cuda(); }
  const std::shared_ptr<Storage>& storage() const { return impl().storage; }
  bool same_storage(const Tensor& o) const { return storage() == o.storage(); }
  TensorImpl& impl() const;
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }

  void* raw_data() const;               // address of element 0 (storage + offset)
  template <class T> T* data() const {  // typed pointer; checks the dtype
    check<DTypeError>(dtype_of<T>() == dtype(), "data<", dtype_name(dtype_of<T>()), ">(): tensor has dtype ",
                      dtype_name(dtype()));
    return static_cast<T*>(raw_data());
  }

  // ---- values (copied to the host) -----------------------------------------------------
  template <class T> T item() const;                    // single-element tensor -> T
  template <class T> std::vector<T> to_vector() const;  // all elements, logical order, cast to T
  std::string str() const;                              // PyTorch-style printout

  // ---- autograd (autograd/tensor_methods.cpp) -----------------------------------------
  bool requires_grad() const;
  Tensor& set_requires_grad(bool on = true);  // only on leaves with a floating dtype
  bool is_leaf() const;
  Tensor grad() const;  // undefined until a backward reaches this leaf
  void set_grad(const Tensor& g);
  void zero_grad();  // drops .grad
  std::shared_ptr<autograd::Node> grad_fn() const;
  // Backpropagates from this tensor. Without `gradient` the tensor must hold one element.
  void backward(const Tensor& gradient = Tensor(), bool retain_graph = false) const;
  Tensor detach() const;  // same storage, outside the graph

  // ---- differentiable views and conversions (autograd/tensor_methods.cpp) --------------
  Tensor reshape(const Shape& shape) const;  // a view when strides allow, else a copy; one -1
  Tensor view(const Shape& shape) const;     // like reshape, but throws instead of copying
  Tensor flatten(int64_t start = 0, int64_t end = -1) const;
  Tensor permute(const std::vector<int64_t>& dims) const;
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor select(int64_t dim, int64_t index) const;  // slice + squeeze
  Tensor expand(const Shape& shape) const;          // -1 keeps a dim; new leading dims allowed
  Tensor squeeze(int64_t dim) const;
  Tensor squeeze() const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor contiguous() const;  // this tensor if already contiguous
  Tensor clone() const;
  Tensor to(DType dtype) const;
  Tensor to(const Device& device) const;
  Tensor cpu() const { return to(kCPU); }

  // ---- in-place updates (not recorded by autograd; for optimizers and initializers) ----
  Tensor& fill_(double value);
  Tensor& zero_() { return fill_(0.0); }
  Tensor& copy_(const Tensor& src);  // broadcasts src, casts its dtype, any device

 private:
  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

// ---- factories (tensor/factory.cpp) -------------------------------------------------------
Tensor empty(const Shape& shape, TensorOptions opts = {});
Tensor zeros(const Shape& shape, TensorOptions opts = {});
Tensor ones(const Shape& shape, TensorOptions opts = {});
Tensor full(const Shape& shape, double value, TensorOptions opts = {});
Tensor scalar_tensor(double value, TensorOptions opts = {});  // 0-dim
Tensor arange(int64_t end, TensorOptions opts = DType::i64);
Tensor arange(double start, double end, double step, TensorOptions opts = DType::i64);
Tensor empty_like(const Tensor& t);
Tensor zeros_like(const Tensor& t);
// Copies host values into a new tensor; numel(shape) must equal values.size().
template <class T> Tensor from_vector(const std::vector<T>& values, const Shape& shape, Device device = kCPU);
template <class T> Tensor from_vector(const std::vector<T>& values) {
  return from_vector(values, Shape{int64_t(values.size())});
}

}  // namespace qkv
