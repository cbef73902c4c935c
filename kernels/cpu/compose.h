// For CPU kernels made of other kernels (linear.cpp, residual_norm.cpp): run one on the given
// tensors, so the composite equals the ops it fuses bit for bit.
#pragma once
#include <vector>

#include "kernels/kernel.h"

namespace qkv::kernels::cpu {

inline void run_kernel(Kernel kernel, std::vector<Tensor> in, std::vector<Tensor> out, const Attrs& attrs) {
  kernel(KernelArgs{in, out, attrs});
}

}  // namespace qkv::kernels::cpu
