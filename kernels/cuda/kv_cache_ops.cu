// The static decode step's ops on CUDA (kernels/cpu/kv_cache_ops.cpp has their semantics): the
// position is read on the device, never by the host, so a CUDA graph that
// captured a step replays it at every position. kv_write: one thread per element, the start
// checked on the device (an IndexError at the next synchronisation, as the index ops report).
// cache_attention: the split-KV kernel (decode_attention.cu) planned for the whole cache, its
// splits past the keys in use empty; shapes it does not take read the start on the host and run
// the attention kernels on the keys in use (not capturable).
#include <cstdint>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/decode_attention.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/layout.h"
#include "tensor/cuda/device_errors.cuh"
#include "tensor/index_errors.h"

namespace qkv::kernels::cuda {
namespace {

using qkv::cuda::DeviceErrorKind;
using qkv::cuda::DeviceErrorRecord;

// cache[b, h, start + t, d] = src[b, h, t, d] for every element of src (contiguous [B Hk, T, D]);
// cache rows of C, strided by its batch, head and row strides, with a contiguous last dim.
template <class T> struct KvWrite {
  T* cache;
  const T* src;
  const int64_t* start;
  int64_t heads, rows, dim, capacity, cs0, cs1, cs2;
  DeviceErrorRecord* record;
  const char* op;
  __device__ void operator()(int64_t i) const {
    const int64_t s = *start;
    if (s < 0 || s + rows > capacity) {
      if (i == 0) qkv::cuda::report_device_error(record, DeviceErrorKind::index, op, s, 0, capacity - rows + 1, 0);
      return;
    }
    const int64_t d = i % dim, t = (i / dim) % rows, bh = i / (dim * rows), b = bh / heads, h = bh % heads;
    cache[b * cs0 + h * cs1 + (s + t) * cs2 + d] = src[i];
  }
};

}  // namespace

// Inputs (cache [B, Hk, C, D] written, src [B, Hk, T, D], start: one int64).
void kv_write(const KernelArgs& k) {
  const Tensor &cache = k.in[0], src = raw::contiguous(k.in[1]), &start = k.in[2];
  set_device(cache);
  const int64_t n = src.numel();
  if (n == 0) return;
  check<ValueError>(cache.stride(3) == 1, "kv_write: the cache's rows must have a contiguous last dim");
  visit_any_float(cache.dtype(), "kv_write", [&]<class T>() {
    launch_flat(n, KvWrite<T>{cache.data<T>(), src.data<T>(), start.data<int64_t>(), cache.size(1), src.size(2),
                              src.size(3), cache.size(2), cache.stride(0), cache.stride(1), cache.stride(2),
                              qkv::cuda::device_error_record(cache.device().index), "kv_write"});
  });
}

// Inputs (q [B, H, T, D], k [B, Hk, C, D], v [B, Hk, C, Dv], start: one int64) -> (out, lse).
void cache_attention(const KernelArgs& k) {
  const auto& at = attr<AttentionAttrs>(k.attrs, "cache_attention");
  const Tensor &q = k.in[0], &keys = k.in[1], &values = k.in[2], &start = k.in[3];
  if (split_kv_supports(q, keys, values, Tensor())) {
    split_kv_attention(q, keys, values, at, k.out[0], k.out[1], start.data<int64_t>());
    return;
  }
  // Other shapes: the start read on the host, then the attention kernels on the keys in use.
  const int64_t s = start.cpu().item<int64_t>(), T = q.size(2), C = keys.size(2);
  if (s < 0 || s + T > C) throw index_out_of_range("cache_attention", s, 0, C - T + 1);
  const int64_t n = s + T;
  const Tensor kp = raw::slice(keys, 2, 0, n, 1);
  const Tensor vp = same_view(keys, values) ? kp : raw::slice(values, 2, 0, n, 1);
  const Tensor in[] = {q, kp, vp, Tensor()};
  attention(KernelArgs{in, k.out, k.attrs});
}

}  // namespace qkv::kernels::cuda
