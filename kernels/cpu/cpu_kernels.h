// CPU kernels, one per op-table row (autograd/op_table.h), declared from kernels/kernel_list.h.
// Each reads KernelArgs: inputs may be strided views; outputs are contiguous and already allocated.
#pragma once
#include "kernels/kernel.h"
#include "kernels/kernel_list.h"

namespace qkv::kernels::cpu {

#define QKV_DECLARE_KERNEL(name) void name(const KernelArgs&);
QKV_KERNELS(QKV_DECLARE_KERNEL)
#undef QKV_DECLARE_KERNEL

// Beyond the op-table rows:
// matmul.cpp: y [N, M] = x [N, K] w [M, K]^T + bias [M] with the bias added in the GEMM's
// epilogue, when the skinny kernel or the GEMM library runs this product (float32, or bf16 on
// AVX512_BF16); false, with y untouched, when neither does.
bool linear_with_bias_epilogue(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y);
// attention's forward over int8 keys and values with float32 row scales [B, Hk, S, 1] (K=V: one
// tensor and one scale), into k.out; k.attrs are AttentionAttrs.
void attention_int8_kv(const Tensor& q, const Tensor& keys, const Tensor& key_scales, const Tensor& values,
                       const Tensor& value_scales, const KernelArgs& k);

}  // namespace qkv::kernels::cpu
