#include "tensor/tensor.h"

#include "tensor/view.h"

namespace qkv {

TensorImpl& Tensor::impl() const {
  if (!impl_) throw ValueError("operation on an undefined tensor (a default-constructed Tensor)");
  return *impl_;
}

int64_t Tensor::size(int64_t d) const { return shape()[wrap_dim(d, dim(), "size")]; }
int64_t Tensor::stride(int64_t d) const { return strides()[wrap_dim(d, dim(), "stride")]; }
bool Tensor::is_contiguous() const { return raw::is_contiguous(shape(), strides()); }

void* Tensor::raw_data() const { return static_cast<char*>(storage()->data()) + offset() * int64_t(element_size()); }

template <class T> std::vector<T> Tensor::to_vector() const {
  if (device().is_cpu()) count_host_sync();  // from a device, the copy to the host counts it
  Tensor host = raw::to(*this, dtype_of<T>(), kCPU);
  host = raw::contiguous(host);
  const T* p = host.data<T>();
  return std::vector<T>(p, p + host.numel());
}

template <class T> T Tensor::item() const {
  check<ShapeError>(numel() == 1, "item(): expected a tensor with one element, got shape ", shape_str(shape()));
  return to_vector<T>()[0];
}

#define QKV_INSTANTIATE_VALUES(T)                       \
  template std::vector<T> Tensor::to_vector<T>() const; \
  template T Tensor::item<T>() const;
QKV_INSTANTIATE_VALUES(float)
QKV_INSTANTIATE_VALUES(double)
QKV_INSTANTIATE_VALUES(int32_t)
QKV_INSTANTIATE_VALUES(int64_t)
QKV_INSTANTIATE_VALUES(uint8_t)
QKV_INSTANTIATE_VALUES(bf16)
QKV_INSTANTIATE_VALUES(f16)
#undef QKV_INSTANTIATE_VALUES

template <> std::vector<bool> Tensor::to_vector<bool>() const {
  std::vector<uint8_t> v = raw::to(*this, DType::b8, kCPU).to_vector<uint8_t>();
  return std::vector<bool>(v.begin(), v.end());
}
template <> bool Tensor::item<bool>() const { return item<uint8_t>() != 0; }

}  // namespace qkv
