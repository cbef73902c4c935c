// CPU kernels, one per op-table row (autograd/op_table.h). Each reads KernelArgs: inputs may be
// strided views; outputs are contiguous and already allocated.
#pragma once
#include "kernels/kernel.h"

namespace qkv::kernels::cpu {

// elementwise.cpp
void add(const KernelArgs&);
void sub(const KernelArgs&);
void mul(const KernelArgs&);
void div(const KernelArgs&);
void gt(const KernelArgs&);
void eq(const KernelArgs&);
void neg(const KernelArgs&);
void abs(const KernelArgs&);
void exp(const KernelArgs&);
void log(const KernelArgs&);
void sqrt(const KernelArgs&);
void rsqrt(const KernelArgs&);
void pow(const KernelArgs&);
void tanh(const KernelArgs&);
void sigmoid(const KernelArgs&);
void relu(const KernelArgs&);
void gelu(const KernelArgs&);
void gelu_backward(const KernelArgs&);
void relu_backward(const KernelArgs&);
void masked_fill(const KernelArgs&);
void where(const KernelArgs&);
// reduce.cpp
void sum(const KernelArgs&);
void mean(const KernelArgs&);
void amax(const KernelArgs&);
void max(const KernelArgs&);
// matmul.cpp
void matmul(const KernelArgs&);
void matmul_accumulate(const KernelArgs&);
// linear.cpp
void linear(const KernelArgs&);
void linear_weight_grad(const KernelArgs&);
// softmax.cpp
void softmax(const KernelArgs&);
void log_softmax(const KernelArgs&);
// layer_norm.cpp
void layer_norm(const KernelArgs&);
void layer_norm_backward(const KernelArgs&);
// residual_norm.cpp
void dropout_add_layer_norm(const KernelArgs&);
// cross_entropy.cpp
void cross_entropy(const KernelArgs&);
void cross_entropy_backward(const KernelArgs&);
// index.cpp
void embedding(const KernelArgs&);
void index_select(const KernelArgs&);
void index_add(const KernelArgs&);
void index_accumulate(const KernelArgs&);
void gather(const KernelArgs&);
void scatter_add(const KernelArgs&);
// matmul.cpp: y [N, M] = x [N, K] w [M, K]^T + bias [M] with the bias added in the GEMM's
// epilogue, when the skinny kernel or the GEMM library runs this product (float32, or bf16 on
// AVX512_BF16); false, with y untouched, when neither does.
bool linear_with_bias_epilogue(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y);
// attention.cpp
void attention(const KernelArgs&);
void attention_backward(const KernelArgs&);
// attention's forward over int8 keys and values with float32 row scales [B, Hk, S, 1] (K=V: one
// tensor and one scale), into k.out; k.attrs are AttentionAttrs.
void attention_int8_kv(const Tensor& q, const Tensor& keys, const Tensor& key_scales, const Tensor& values,
                       const Tensor& value_scales, const KernelArgs& k);
// kv_cache_ops.cpp
void cache_attention(const KernelArgs&);
void kv_write(const KernelArgs&);
void quantize_int8(const KernelArgs&);
// conv.cpp
void conv2d(const KernelArgs&);
void conv2d_backward(const KernelArgs&);
// batch_norm.cpp
void batch_norm(const KernelArgs&);
// pool.cpp
void max_pool2d(const KernelArgs&);
void adaptive_avg_pool2d(const KernelArgs&);
// optim.cpp (in place: they update the inputs their row's writes column names)
void adam_update(const KernelArgs&);
void sgd_update(const KernelArgs&);
void clip_grad_norm(const KernelArgs&);
// random.cpp
void dropout(const KernelArgs&);
void relu_dropout(const KernelArgs&);
void uniform(const KernelArgs&);
void normal(const KernelArgs&);
void bernoulli(const KernelArgs&);

}  // namespace qkv::kernels::cpu
