// CUDA kernels, one per op-table row (autograd/op_table.h names them in its CUDA column),
// declared from kernels/kernel_list.h. A plain C++ header: the definitions live in the .cu files
// of this folder.
#pragma once
#include "kernels/kernel.h"
#include "kernels/kernel_list.h"

namespace qkv::kernels::cuda {

#define QKV_DECLARE_KERNEL(name) void name(const KernelArgs&);
QKV_KERNELS(QKV_DECLARE_KERNEL)
#undef QKV_DECLARE_KERNEL

}  // namespace qkv::kernels::cuda
