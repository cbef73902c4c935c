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
// attention's forward over cached keys and values [B, Hk, S, D], into k.out (k.attrs are
// AttentionAttrs): rows in q's dtype, or int8 with float32 row scales [B, Hk, S, 1] (K=V: one
// tensor and one scale); with cos and sin [P >= S, R/2], each key row j is turned by row j of
// the rotary tables as it is read (values are the rows as stored).
struct CacheOperand {
  Tensor rows, scales;
};
void attention_over_cache(const Tensor& q, const CacheOperand& keys, const CacheOperand& values, const Tensor& cos,
                          const Tensor& sin, const KernelArgs& k);

}  // namespace qkv::kernels::cpu
