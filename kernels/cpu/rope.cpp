// Rotary position embedding (RoPE) on the CPU, in the rotate-half pairing of Hugging Face's Llama:
// within the first R dims of each head, element i < R/2 pairs with i + R/2, and position p turns
// the pair by the angle whose cosine and sine are row p of the tables:
//   y[i] = x[i] cos - x[i + R/2] sin,   y[i + R/2] = x[i + R/2] cos + x[i] sin,
// the dims past R are copied. The inverse (the backward) turns by the opposite angle.
#include <omp.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/loops.h"
#include "tensor/index_errors.h"
#include "tensor/view.h"

namespace qkv::kernels::cpu {

// Inputs (x [B, T, H, D] any strides, cos, sin [P, R/2], start? one int64) -> y [B, T, H, D]:
// token t of every sequence at position start + t (start 0 when absent).
void rope(const KernelArgs& k) {
  const bool inverse = attr<RopeAttrs>(k.attrs, "rope").inverse;
  const Tensor& x = k.in[0];
  const int64_t B = x.size(0), T = x.size(1), H = x.size(2), D = x.size(3), half = k.in[1].size(1);
  const int64_t P = k.in[1].size(0), start = k.in[3].defined() ? *k.in[3].data<int64_t>() : 0;
  if (start < 0 || start + T > P) throw index_out_of_range("rope", start, 0, P - T + 1);
  visit_float(x.dtype(), "rope", [&]<class F>() {
    const Tensor cos_t = raw::contiguous(raw::to(k.in[1], dtype_of<F>(), kCPU));
    const Tensor sin_t = raw::contiguous(raw::to(k.in[2], dtype_of<F>(), kCPU));
    const F* xp = x.data<F>();
    const F *cp = cos_t.data<F>(), *sp = sin_t.data<F>();
    F* yp = k.out[0].data<F>();
    const int64_t s0 = x.stride(0), s1 = x.stride(1), s2 = x.stride(2), s3 = x.stride(3);
    const F sign = inverse ? F(-1) : F(1);
#pragma omp parallel for collapse(2) schedule(static) if (B * T * H * D >= kParallelGrain)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t) {
        const F* c = cp + (start + t) * half;
        const F* s = sp + (start + t) * half;
        for (int64_t h = 0; h < H; ++h) {
          const F* src = xp + b * s0 + t * s1 + h * s2;
          F* dst = yp + ((b * T + t) * H + h) * D;
#pragma omp simd
          for (int64_t i = 0; i < half; ++i) {
            const F x1 = src[i * s3], x2 = src[(i + half) * s3], si = sign * s[i];
            dst[i] = x1 * c[i] - x2 * si;
            dst[i + half] = x2 * c[i] + x1 * si;
          }
          for (int64_t i = 2 * half; i < D; ++i) dst[i] = src[i * s3];
        }
      }
  });
}

}  // namespace qkv::kernels::cpu
