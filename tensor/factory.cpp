#include <cmath>
#include <new>

#include "tensor/alloc_purpose.h"
#include "tensor/tensor.h"
#include "tensor/view.h"

namespace qkv {

// Byte size of a shape, refusing products that overflow or exceed any real memory (2^50 bytes).
size_t checked_nbytes(const Shape& shape, DType dtype) {
  uint64_t n = dtype_size(dtype);
  bool overflow = false;
  for (int64_t d : shape) {
    check<ShapeError>(d >= 0, "empty: negative dimension in shape ", shape_str(shape));
    overflow |= __builtin_mul_overflow(n, uint64_t(d), &n);
  }
  check<ShapeError>(!overflow && n <= (uint64_t(1) << 50), "empty: shape ", shape_str(shape), " of ", dtype_name(dtype),
                    " is too large to allocate");
  return size_t(n);
}

Tensor empty(const Shape& shape, TensorOptions opts) {
  const size_t nbytes = checked_nbytes(shape, opts.dtype);
  check_device_usable(opts.device, "empty");
  auto impl = std::make_shared<TensorImpl>();
  try {
    impl->storage = std::make_shared<Storage>(nbytes, opts.device);
  } catch (const OutOfMemory& e) {
    throw OutOfMemory(cat(e.what(), " for a ", dtype_name(opts.dtype), " tensor of shape ", shape_str(shape),
                          allocation_purpose_suffix()));
  } catch (const std::bad_alloc&) {
    throw OutOfMemory(cat("out of memory on ", opts.device, ": failed to allocate ", nbytes, " bytes for a ",
                          dtype_name(opts.dtype), " tensor of shape ", shape_str(shape), allocation_purpose_suffix()));
  }
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = opts.dtype;
  return Tensor(std::move(impl));
}

Tensor full(const Shape& shape, double value, TensorOptions opts) {
  Tensor t = empty(shape, opts);
  raw::fill(t, value);
  return t;
}
Tensor zeros(const Shape& shape, TensorOptions opts) { return full(shape, 0.0, opts); }
Tensor ones(const Shape& shape, TensorOptions opts) { return full(shape, 1.0, opts); }
Tensor scalar_tensor(double value, TensorOptions opts) { return full({}, value, opts); }
Tensor empty_like(const Tensor& t) { return empty(t.shape(), {t.dtype(), t.device()}); }
Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), {t.dtype(), t.device()}); }

Tensor arange(int64_t end, TensorOptions opts) { return arange(0, double(end), 1, opts); }

Tensor arange(double start, double end, double step, TensorOptions opts) {
  check<ValueError>(step != 0 && std::isfinite(start) && std::isfinite(end) && std::isfinite(step),
                    "arange: need finite start/end and a non-zero step, got (", start, ", ", end, ", ", step, ")");
  const int64_t n = std::max<int64_t>(0, int64_t(std::ceil((end - start) / step)));
  Tensor host = empty({n}, {DType::f64, kCPU});
  double* p = host.data<double>();
  for (int64_t i = 0; i < n; ++i) p[i] = start + double(i) * step;
  return raw::to(host, opts.dtype, opts.device);
}

template <class T> Tensor from_vector(const std::vector<T>& values, const Shape& shape, Device device) {
  check<ShapeError>(numel(shape) == int64_t(values.size()), "from_vector: ", values.size(),
                    " values do not fill shape ", shape_str(shape));
  Tensor host = empty(shape, {dtype_of<T>(), kCPU});
  T* p = static_cast<T*>(host.raw_data());
  for (size_t i = 0; i < values.size(); ++i) p[i] = values[i];
  return raw::to(host, host.dtype(), device);
}

template Tensor from_vector(const std::vector<float>&, const Shape&, Device);
template Tensor from_vector(const std::vector<double>&, const Shape&, Device);
template Tensor from_vector(const std::vector<int32_t>&, const Shape&, Device);
template Tensor from_vector(const std::vector<int64_t>&, const Shape&, Device);
template Tensor from_vector(const std::vector<uint8_t>&, const Shape&, Device);
template Tensor from_vector(const std::vector<bool>&, const Shape&, Device);
template Tensor from_vector(const std::vector<bf16>&, const Shape&, Device);
template Tensor from_vector(const std::vector<f16>&, const Shape&, Device);

}  // namespace qkv
