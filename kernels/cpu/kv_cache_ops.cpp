// The static decode step's ops (autograd/ops.h has their semantics): kv_write copies the new
// rows' keys or values into a preallocated cache at a position held in a tensor, and
// cache_attention attends from the new rows over the cache up to them, so that a decode step's
// kernels and arguments are the same at every position (a CUDA graph replays them). On the CPU
// both read the position from the tensor and reuse the copy and attention kernels.
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

// Inputs (q [B, H, T, D], k [B, Hk, C, D], v [B, Hk, C, Dv], start: one int64) -> (out, lse):
// the T new rows at positions start .. start + T - 1 attend over keys [0, start + T), causal
// bottom-right when attrs.causal.
void cache_attention(const KernelArgs& k) {
  const int64_t T = k.in[0].size(2), C = k.in[1].size(2), start = *k.in[3].data<int64_t>();
  if (start < 0 || start + T > C) throw index_out_of_range("cache_attention", start, 0, C - T + 1);
  const int64_t length = start + T;
  // K and V as one tensor stay one view: the attention kernel then reads each tile once.
  const Tensor keys = raw::slice(k.in[1], 2, 0, length, 1);
  const Tensor values = same_view(k.in[1], k.in[2]) ? keys : raw::slice(k.in[2], 2, 0, length, 1);
  run_kernel(attention, {k.in[0], keys, values, Tensor()}, {k.out.begin(), k.out.end()}, k.attrs);
}

}  // namespace qkv::kernels::cpu
