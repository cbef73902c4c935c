// CUDA kernels, one per op-table row that has one (autograd/op_table.h names them in its CUDA
// column). A plain C++ header: the definitions live in the .cu files of this folder.
#pragma once
#include "kernels/kernel.h"

namespace qkv::kernels::cuda {

// elementwise.cu
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
// reduce.cu
void sum(const KernelArgs&);
void mean(const KernelArgs&);
void amax(const KernelArgs&);
void max(const KernelArgs&);
// matmul.cpp (cuBLASLt)
void matmul(const KernelArgs&);
void matmul_accumulate(const KernelArgs&);
// linear.cu (cuBLASLt with epilogues: bias, bias gradient)
void linear(const KernelArgs&);
void linear_weight_grad(const KernelArgs&);
// softmax.cu
void softmax(const KernelArgs&);
void log_softmax(const KernelArgs&);
// layer_norm.cu
void layer_norm(const KernelArgs&);
void layer_norm_backward(const KernelArgs&);
// residual_norm.cu
void dropout_add_layer_norm(const KernelArgs&);
// cross_entropy.cu
void cross_entropy(const KernelArgs&);
void cross_entropy_backward(const KernelArgs&);
// index.cu
void embedding(const KernelArgs&);
void index_select(const KernelArgs&);
void index_add(const KernelArgs&);
void index_accumulate(const KernelArgs&);
void gather(const KernelArgs&);
void scatter_add(const KernelArgs&);
// random.cu
void dropout(const KernelArgs&);
void relu_dropout(const KernelArgs&);
void uniform(const KernelArgs&);
void normal(const KernelArgs&);
void bernoulli(const KernelArgs&);
// attention.cu
void attention(const KernelArgs&);
void attention_backward(const KernelArgs&);
// kv_cache_ops.cu
void cache_attention(const KernelArgs&);
void kv_write(const KernelArgs&);
void quantize_int8(const KernelArgs&);
// conv.cu
void conv2d(const KernelArgs&);
void conv2d_backward(const KernelArgs&);
// batch_norm.cu
void batch_norm(const KernelArgs&);
// pool.cu
void max_pool2d(const KernelArgs&);
void adaptive_avg_pool2d(const KernelArgs&);
// optim.cu
void adam_update(const KernelArgs&);
void sgd_update(const KernelArgs&);
void clip_grad_norm(const KernelArgs&);

}  // namespace qkv::kernels::cuda
