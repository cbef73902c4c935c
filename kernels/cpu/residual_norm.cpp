// dropout_add_layer_norm on the CPU: the kernels the unfused ops run (dropout, add, layer_norm)
// in that order, so the fused op equals them bit for bit here; the single pass over x and y is
// the CUDA kernel's (kernels/cuda/residual_norm.cu).
#include "kernels/cpu/compose.h"
#include "kernels/cpu/cpu_kernels.h"

namespace qkv::kernels::cpu {

// Inputs (x, y [..., D], weight? bias? [D]) -> (normed, mean, rstd: layer_norm's outputs for
// sum; sum = x + dropout(y)).
void dropout_add_layer_norm(const KernelArgs& k) {
  const auto& a = attr<DropoutAddNormAttrs>(k.attrs, "dropout_add_layer_norm");
  Tensor branch = k.in[1];
  if (a.p > 0) {
    branch = empty(k.in[1].shape(), {k.in[1].dtype(), k.in[1].device()});
    run_kernel(dropout, {k.in[1]}, {branch}, DropoutAttrs{a.p, a.seed, a.offset});
  }
  run_kernel(add, {k.in[0], branch}, {k.out[3]}, NoAttrs{});
  run_kernel(layer_norm, {k.out[3], k.in[2], k.in[3]}, {k.out[0], k.out[1], k.out[2]}, LayerNormAttrs{a.eps});
}

}  // namespace qkv::kernels::cpu
