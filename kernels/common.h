// Kernels that work on any device because they only move data through raw::copy: the same
// function fills both the CPU and the CUDA column of their op-table rows.
#pragma once
#include "kernels/kernel.h"

namespace qkv::kernels::common {

void concat(const KernelArgs&);  // copies each input into its slice of the output
void cast(const KernelArgs&);    // copy with dtype conversion
void copy(const KernelArgs&);    // contiguous copy

}  // namespace qkv::kernels::common
