// The calling convention every kernel shares: inputs (possibly strided, possibly undefined for
// optional inputs), outputs already allocated with the shapes the op's shape rule gave
// (contiguous, unless the rule gave a memory order: attention's heads), and the op's
// attributes. Kernels write only their outputs, plus the inputs their row's `writes` column
// names (those arrive contiguous), and never record autograd.
#pragma once
#include <span>

#include "kernels/attrs.h"

namespace qkv::kernels {

struct KernelArgs {
  std::span<const Tensor> in;
  std::span<Tensor> out;
  const Attrs& attrs;
};

using Kernel = void (*)(const KernelArgs&);

}  // namespace qkv::kernels
