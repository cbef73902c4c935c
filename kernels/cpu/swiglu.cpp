// The SwiGLU gate of a Llama MLP on the CPU: h [..., 2F] holds the gate projection (first F) and
// the up projection (last F) of each token; y = silu(gate) * up, silu(a) = a sigmoid(a).
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/loops.h"
#include "tensor/view.h"

namespace qkv::kernels::cpu {
namespace {

// Calls f(a, b, row) over the rows of h [rows, 2F]: a its first F, b its last F, as Eigen arrays.
template <class F, class Fn> void each_row(const Tensor& h, int64_t F_, Fn&& f) {
  const int64_t rows = F_ ? h.numel() / (2 * F_) : 0;
  const F* hp = h.data<F>();
#pragma omp parallel for schedule(static) if (rows * F_ >= kParallelGrain)
  for (int64_t r = 0; r < rows; ++r)
    f(ConstArrMap<F>(hp + r * 2 * F_, F_), ConstArrMap<F>(hp + r * 2 * F_ + F_, F_), r);
}

}  // namespace

// Inputs (h [..., 2F]) -> y [..., F].
void swiglu(const KernelArgs& k) {
  const Tensor h = raw::contiguous(k.in[0]);
  const int64_t F_ = k.out[0].size(-1);
  visit_float(h.dtype(), "swiglu", [&]<class F>() {
    F* y = k.out[0].data<F>();
    each_row<F>(h, F_, [&](const auto& a, const auto& b, int64_t r) {
      ArrMap<F>(y + r * F_, F_) = a / (F(1) + (-a).exp()) * b;
    });
  });
}

// Inputs (grad [..., F], h [..., 2F]) -> dh [..., 2F]: d gate = grad up sigmoid(a) (1 + a (1 -
// sigmoid(a))), d up = grad silu(a).
void swiglu_backward(const KernelArgs& k) {
  const Tensor g = raw::contiguous(k.in[0]), h = raw::contiguous(k.in[1]);
  const int64_t F_ = g.size(-1);
  visit_float(h.dtype(), "swiglu_backward", [&]<class F>() {
    const F* gp = g.data<F>();
    F* dh = k.out[0].data<F>();
    each_row<F>(h, F_, [&](const auto& a, const auto& b, int64_t r) {
      const ConstArrMap<F> gr(gp + r * F_, F_);
      const Arr<F> sig = F(1) / (F(1) + (-a).exp());
      ArrMap<F>(dh + r * 2 * F_, F_) = gr * b * sig * (F(1) + a * (F(1) - sig));
      ArrMap<F>(dh + r * 2 * F_ + F_, F_) = gr * a * sig;
    });
  });
}

}  // namespace qkv::kernels::cpu
