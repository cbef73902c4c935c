// The static decode step's ops (autograd/ops.h has their semantics): kv_write copies the new
// rows' keys or values into a preallocated cache at a position held in a tensor, and
// cache_attention attends from the new rows over the cache up to them, so that a decode step's
// kernels and arguments are the same at every position (a CUDA graph replays them). On the CPU
// both read the position from the tensor and reuse the copy and attention kernels.
// quantize_int8 rounds rows to int8 with one float32 scale each (an int8 cache's writes);
// cache_attention reads such a cache with its scales, a tile at a time.
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/compose.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/layout.h"
#include "tensor/index_errors.h"
#include "tensor/view.h"

namespace qkv::kernels::cpu {

// Inputs (cache [B, Hk, C, D] written, src [B, Hk, T, D], start: one int64).
void kv_write(const KernelArgs& k) {
  const Tensor &cache = k.in[0], &src = k.in[1];
  const int64_t T = src.size(2), C = cache.size(2), start = *k.in[2].data<int64_t>();
  if (start < 0 || start + T > C) throw index_out_of_range("kv_write", start, 0, C - T + 1);
  raw::copy(raw::slice(cache, 2, start, start + T, 1), src);
}

// Inputs (q [B, H, T, D], k [B, Hk, C, D], v [B, Hk, C, Dv], start: one int64, k_scale?,
// v_scale? [B, Hk, C, 1] for int8 k and v, cos? sin? [P, R/2] to turn the keys as read) ->
// (out, lse): the T new rows at positions start .. start + T - 1 attend over keys
// [0, start + T), causal bottom-right when attrs.causal.
void cache_attention(const KernelArgs& k) {
  const int64_t T = k.in[0].size(2), C = k.in[1].size(2), start = *k.in[3].data<int64_t>();
  if (start < 0 || start + T > C) throw index_out_of_range("cache_attention", start, 0, C - T + 1);
  const int64_t length = start + T;
  // K and V as one tensor stay one view: the attention kernel then reads each tile once.
  const Tensor keys = raw::slice(k.in[1], 2, 0, length, 1);
  const bool shared = same_view(k.in[1], k.in[2]);
  const Tensor values = shared ? keys : raw::slice(k.in[2], 2, 0, length, 1);
  const bool int8 = k.in[1].dtype() == DType::i8;
  const Tensor key_scales = int8 ? raw::slice(k.in[4], 2, 0, length, 1) : Tensor();
  const Tensor value_scales = int8 && !shared ? raw::slice(k.in[5], 2, 0, length, 1) : key_scales;
  attention_over_cache(k.in[0], {keys, key_scales}, {values, value_scales}, k.in[6], k.in[7], k);
}

// Inputs (x [..., D]) -> (q int8 [..., D], scale float32 [..., 1]): per row, scale = max |x| / 127
// and q = round(x / scale), so that q * scale is within scale / 2 of x (a row of zeros: scale 0;
// a row holding a NaN or inf: scale NaN, so that the non-finite value is not lost).
void quantize_int8(const KernelArgs& k) {
  const Tensor x = raw::contiguous(k.in[0]);
  const int64_t D = x.size(-1), rows = D == 0 ? 0 : x.numel() / D;
  int8_t* q = k.out[0].data<int8_t>();
  float* scale = k.out[1].data<float>();
  visit_any_float(x.dtype(), "quantize_int8", [&]<class T>() {
    const T* p = x.data<T>();
#pragma omp parallel for if (rows * D >= (1 << 16))
    for (int64_t r = 0; r < rows; ++r) {
      const T* row = p + r * D;
      float amax = 0;
      bool finite = true;
      for (int64_t c = 0; c < D; ++c) {
        const float v = std::abs(float(row[c]));
        finite = finite && std::isfinite(v);
        amax = std::max(amax, v);
      }
      if (!finite) amax = 0;
      const float inv = amax > 0 ? 127.0f / amax : 0.0f;
      scale[r] = finite ? amax / 127.0f : std::numeric_limits<float>::quiet_NaN();
      for (int64_t c = 0; c < D; ++c)
        q[r * D + c] = int8_t(std::lrint(std::clamp(float(row[c]) * inv, -127.0f, 127.0f)));
    }
  });
}

}  // namespace qkv::kernels::cpu
