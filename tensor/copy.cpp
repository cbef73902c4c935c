// raw::copy and raw::fill: the one place where tensor data moves between layouts, dtypes and
// devices. The CPU path is a strided, casting loop; CUDA paths go through tensor/cuda/.
#include <cstring>

#include "tensor/convert.h"
#include "tensor/cuda/cuda_runtime.h"
#include "tensor/strided_loop.h"
#include "tensor/view.h"

namespace qkv::raw {
namespace {

constexpr int64_t kParallelCopy = 1 << 16;

template <class D, class S> void copy_cpu_typed(const Tensor& dst, const Tensor& src_b) {
  auto L = make_strided_loop<2>(dst.shape(), {dst.strides(), src_b.strides()});
  D* d = static_cast<D*>(dst.raw_data());
  const S* s = static_cast<const S*>(src_b.raw_data());
  const auto is = L.inner_strides();
  for_each_row(L, kParallelCopy, [&](const std::array<int64_t, 2>& off, int64_t n) {
    D* dp = d + off[0];
    const S* sp = s + off[1];
    if (is[0] == 1 && is[1] == 1) {
      if constexpr (std::is_same_v<D, S>) std::memcpy(dp, sp, size_t(n) * sizeof(D));
      else
        for (int64_t i = 0; i < n; ++i) dp[i] = convert<D>(sp[i]);
    } else if (is[0] == 1 && is[1] == 0) {
      const D v = convert<D>(sp[0]);
      for (int64_t i = 0; i < n; ++i) dp[i] = v;
    } else {
      for (int64_t i = 0; i < n; ++i) dp[i * is[0]] = convert<D>(sp[i * is[1]]);
    }
  });
}

void copy_cpu(const Tensor& dst, const Tensor& src_b) {
  visit_dtype(dst.dtype(),
              [&]<class D>() { visit_dtype(src_b.dtype(), [&]<class S>() { copy_cpu_typed<D, S>(dst, src_b); }); });
}

bool overlaps(const Tensor& a, const Tensor& b) {
  if (!a.same_storage(b)) return false;
  // Conservative: any shared storage with a different layout counts as overlapping.
  return !(a.offset() == b.offset() && a.strides() == b.strides() && a.dtype() == b.dtype());
}

}  // namespace

void copy(const Tensor& dst, const Tensor& src) {
  Tensor s = expand(src, dst.shape());
  if (dst.numel() == 0) return;
  if (overlaps(dst, s)) {  // e.g. x.copy_(x.t()): read everything before writing anything
    Tensor fresh = empty(s.shape(), {s.dtype(), s.device()});
    copy(fresh, s);
    s = fresh;
  }
  const Device dd = dst.device(), sd = s.device();
  if (dd.is_cpu() && sd.is_cpu()) return copy_cpu(dst, s);
#ifdef QKV_HAVE_CUDA
  if (dd.is_cuda() && sd.is_cuda() && dd.index == sd.index) return cuda::strided_copy(dst, s);
  if (dd.is_cuda() && sd.is_cuda()) {
    Tensor packed = contiguous(s);
    Tensor staging = empty(packed.shape(), {packed.dtype(), dd});
    cuda::memcpy_d2d(staging.raw_data(), dd.index, packed.raw_data(), sd.index, packed.nbytes());
    return cuda::strided_copy(dst, staging);
  }
  if (dd.is_cuda()) {  // host -> device: pack on the host in dst's dtype, one transfer
    Tensor packed = empty(dst.shape(), {dst.dtype(), kCPU});
    copy_cpu(packed, s);
    if (dst.is_contiguous()) return cuda::copy_h2d_async(dst.raw_data(), packed.raw_data(), packed.nbytes(), dd.index);
    Tensor staging = empty(dst.shape(), {dst.dtype(), dd});
    cuda::copy_h2d_async(staging.raw_data(), packed.raw_data(), packed.nbytes(), dd.index);
    return cuda::strided_copy(dst, staging);
  }
  // device -> host: pack on the device (when needed), one transfer, then cast on the host
  Tensor packed = s;
  if (!packed.is_contiguous() || packed.numel() != dst.numel()) {
    packed = empty(dst.shape(), {s.dtype(), sd});
    cuda::strided_copy(packed, s);
  }
  Tensor host = empty(packed.shape(), {packed.dtype(), kCPU});
  cuda::memcpy_d2h(host.raw_data(), packed.raw_data(), packed.nbytes(), sd.index);
  return copy_cpu(dst, host);
#else
  throw DeviceError(cat("copy: cannot copy from ", sd, " to ", dd, " in a build without CUDA"));
#endif
}

void fill(const Tensor& t, double value) {
  if (t.numel() == 0) return;
  if (t.device().is_cuda()) {
#ifdef QKV_HAVE_CUDA
    return cuda::fill(t, value);
#endif
  }
  Tensor scalar = empty({}, {DType::f64, kCPU});
  *scalar.data<double>() = value;
  copy_cpu(t, expand(scalar, t.shape()));
}

}  // namespace qkv::raw
