// The static decode step's ops on CUDA (kernels/cpu/kv_cache_ops.cpp has their semantics): the
// position is read on the device, never by the host, so a CUDA graph that
// captured a step replays it at every position. kv_write: one thread per element, the start
// checked on the device (an IndexError at the next synchronisation, as the index ops report).
// cache_attention: the split-KV kernel (decode_attention.cu) planned for the whole cache, its
// splits past the keys in use empty; shapes it does not take read the start on the host and run
// the attention kernels on the keys in use (not capturable). An int8 cache is read in place by
// the split-KV kernel, a tile at a time; for the shapes it does not take, it is widened to the
// queries' dtype (its row scales applied) into a buffer of the cache's size first. quantize_int8
// is one warp per row.
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/attention/decode_attention.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/layout.h"
#include "tensor/cuda/device_errors.cuh"
#include "tensor/cuda/stream.h"
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

// One warp per row of D: q = round(x * 127 / max |x|), scale = max |x| / 127 (NaN when the row
// holds a NaN or inf, whose q is then 0).
template <class T> __global__ void quantize_rows(const T* x, int8_t* q, float* scale, int64_t rows, int64_t D) {
  const int lane = threadIdx.x % kWarp;
  const int64_t warps = grid_threads() / kWarp;
  for (int64_t r = global_thread() / kWarp; r < rows; r += warps) {
    const T* row = x + r * D;
    float amax = 0;
    bool finite = true;
    for (int64_t c = lane; c < D; c += kWarp) {
      const float v = fabsf(float(row[c]));
      finite = finite && isfinite(v);
      amax = fmaxf(amax, v);
    }
    amax = warp_reduce(amax, MaxOp{});
    finite = __all_sync(0xffffffffu, finite);
    if (!finite) amax = 0;
    const float inv = amax > 0 ? 127.0f / amax : 0.0f;
    for (int64_t c = lane; c < D; c += kWarp)
      q[r * D + c] = int8_t(__float2int_rn(fminf(fmaxf(float(row[c]) * inv, -127.0f), 127.0f)));
    if (lane == 0) scale[r] = finite ? amax / 127.0f : CUDART_NAN_F;
  }
}

// out[i] = q[i] * scale[i / D] over a contiguous [rows, D] int8 tensor, multiplied in double for
// float64 queries (as the CPU widens) and in float otherwise.
template <class T> struct Dequantize {
  T* out;
  const int8_t* q;
  const float* scale;
  int64_t D;
  __device__ void operator()(int64_t i) const {
    using W = std::conditional_t<std::is_same_v<T, double>, double, float>;
    out[i] = T(W(q[i]) * W(scale[i / D]));
  }
};

Tensor dequantized(const Tensor& q, const Tensor& scale, DType dtype) {
  const Tensor qc = raw::contiguous(q), sc = raw::contiguous(scale);
  Tensor out = empty(qc.shape(), {dtype, q.device()});
  visit_any_float(dtype, "cache_attention", [&]<class T>() {
    launch_flat(qc.numel(), Dequantize<T>{out.data<T>(), qc.data<int8_t>(), sc.data<float>(), qc.size(-1)});
  });
  return out;
}

// Cache elements: the float types, or int8.
template <class F> void visit_cache_dtype(DType dt, F&& f) {
  if (dt == DType::i8) return f.template operator()<int8_t>();
  visit_any_float(dt, "kv_write", std::forward<F>(f));
}

}  // namespace

// Inputs (cache [B, Hk, C, D] written, src [B, Hk, T, D], start: one int64).
void kv_write(const KernelArgs& k) {
  const Tensor &cache = k.in[0], src = raw::contiguous(k.in[1]), &start = k.in[2];
  set_device(cache);
  const int64_t n = src.numel();
  if (n == 0) return;
  check<ValueError>(cache.stride(3) == 1, "kv_write: the cache's rows must have a contiguous last dim");
  visit_cache_dtype(cache.dtype(), [&]<class T>() {
    launch_flat(n, KvWrite<T>{cache.data<T>(), src.data<T>(), start.data<int64_t>(), cache.size(1), src.size(2),
                              src.size(3), cache.size(2), cache.stride(0), cache.stride(1), cache.stride(2),
                              qkv::cuda::device_error_record(cache.device().index), "kv_write"});
  });
}

namespace {

// Keys [B, Hk, n, D] (float32 or float64) turned by rows 0..n-1 of the rotary tables, as a new
// tensor (the rope kernel over the keys viewed as [B, n, Hk, D]).
Tensor rotated(const Tensor& keys, const Tensor& cos, const Tensor& sin) {
  const Tensor tokens = raw::permute(keys, {0, 2, 1, 3});
  Tensor out = empty(tokens.shape(), {keys.dtype(), keys.device()});
  const Tensor in[] = {tokens, cos, sin, Tensor()};
  Tensor outs[] = {out};
  const Attrs attrs = RopeAttrs{};
  rope(KernelArgs{in, outs, attrs});
  return raw::permute(out, {0, 2, 1, 3});
}

}  // namespace

// Inputs (q [B, H, T, D], k [B, Hk, C, D], v [B, Hk, C, Dv], start: one int64, k_scale?,
// v_scale? for int8 k, v, cos? sin? to turn the keys as read) -> (out, lse).
void cache_attention(const KernelArgs& k) {
  const auto& at = attr<AttentionAttrs>(k.attrs, "cache_attention");
  const Tensor &q = k.in[0], &keys = k.in[1], &values = k.in[2], &start = k.in[3];
  const Tensor &cos = k.in[6], &sin = k.in[7];
  // Any cache dtype, int8 read in place; a short cache too while a CUDA graph captures the step.
  if (split_kv_supports(q, keys, values, Tensor(), qkv::cuda::capturing(), cos.defined())) {
    split_kv_attention(q, keys, values, at, k.out[0], k.out[1],
                       CacheExtras{start.data<int64_t>(), k.in[4], k.in[5], cos, sin});
    return;
  }
  if (keys.dtype() == DType::i8) {  // shapes the split kernel does not take: widened whole first
    set_device(q);
    const Tensor wide_keys = dequantized(keys, k.in[4], q.dtype());
    const Tensor wide_values = same_view(keys, values) ? wide_keys : dequantized(values, k.in[5], q.dtype());
    const Tensor in[] = {q, wide_keys, wide_values, start, Tensor(), Tensor(), cos, sin};
    return cache_attention(KernelArgs{in, k.out, k.attrs});
  }
  if (cos.defined() && (keys.dtype() == DType::bf16 || keys.dtype() == DType::f16)) {
    // Keys turned from a 16-bit cache stay float32, as the split-KV kernel and the CPU turn them:
    // the operands are widened, the output rounded once.
    set_device(q);
    const Tensor wide_keys = raw::to(keys, DType::f32, q.device());
    const Tensor wide_values = same_view(keys, values) ? wide_keys : raw::to(values, DType::f32, q.device());
    Tensor out = empty(k.out[0].shape(), {DType::f32, q.device()});
    const Tensor in[] = {
        raw::to(q, DType::f32, q.device()), wide_keys, wide_values, start, Tensor(), Tensor(), cos, sin};
    Tensor outs[] = {out, k.out[1]};
    cache_attention(KernelArgs{in, outs, k.attrs});
    return raw::copy(k.out[0], out);
  }
  // Other shapes: the start read on the host (refused while capturing), then the attention
  // kernels on the keys in use (turned first when the cache stores them unrotated).
  const int64_t s = start.cpu().item<int64_t>(), T = q.size(2), C = keys.size(2);
  if (s < 0 || s + T > C) throw index_out_of_range("cache_attention", s, 0, C - T + 1);
  const int64_t n = s + T;
  const Tensor stored = raw::slice(keys, 2, 0, n, 1);
  const Tensor vp = same_view(keys, values) ? stored : raw::slice(values, 2, 0, n, 1);
  const Tensor kp = cos.defined() ? rotated(stored, cos, sin) : stored;
  const Tensor in[] = {q, kp, vp, Tensor()};
  attention(KernelArgs{in, k.out, k.attrs});
}

// Inputs (x [..., D]) -> (q int8 [..., D], scale float32 [..., 1]).
void quantize_int8(const KernelArgs& k) {
  const Tensor x = raw::contiguous(k.in[0]);
  set_device(x);
  const int64_t D = x.size(-1), rows = D == 0 ? 0 : x.numel() / D;
  if (rows == 0) return;
  visit_any_float(x.dtype(), "quantize_int8", [&]<class T>() {
    const int64_t threads = rows * kWarp;
    QKV_LAUNCH(blocks_for(threads, kThreads), kThreads, 0, launch_stream(), quantize_rows<T>)
    (x.data<T>(), k.out[0].data<int8_t>(), k.out[1].data<float>(), rows, D);
  });
  QKV_CUDA_LAUNCH_CHECK();
}

}  // namespace qkv::kernels::cuda
