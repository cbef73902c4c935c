// The kernels every backend implements, one per op-table row (autograd/op_table.h), grouped by
// the file that holds them (cpu/<file>.cpp, cuda/<file>.cu; matmul is cuBLASLt in cuda/matmul.cpp).
// cpu/cpu_kernels.h and cuda/cuda_kernels.h declare them from this one list, so a kernel added
// to one backend's header is declared for the other too and a missing definition fails to link.
#pragma once

// clang-format off
#define QKV_KERNELS(X) \
  /* elementwise */ X(add) X(sub) X(mul) X(div) X(gt) X(eq) X(neg) X(abs) X(exp) X(log) X(sqrt) X(rsqrt) X(pow) \
                    X(tanh) X(sigmoid) X(relu) X(gelu) X(gelu_backward) X(relu_backward) X(masked_fill) X(where) \
  /* reduce */ X(sum) X(mean) X(amax) X(max) \
  /* matmul */ X(matmul) X(matmul_accumulate) \
  /* linear */ X(linear) X(linear_weight_grad) \
  /* softmax */ X(softmax) X(log_softmax) \
  /* layer_norm */ X(layer_norm) X(layer_norm_backward) X(rms_norm) X(rms_norm_backward) \
  /* residual_norm */ X(dropout_add_layer_norm) X(dropout_add_rms_norm) \
  /* rope */ X(rope) \
  /* swiglu */ X(swiglu) X(swiglu_backward) \
  /* cross_entropy */ X(cross_entropy) X(cross_entropy_backward) \
  /* index */ X(embedding) X(index_select) X(index_add) X(index_accumulate) X(gather) X(scatter_add) \
  /* random */ X(dropout) X(relu_dropout) X(uniform) X(normal) X(bernoulli) \
  /* attention */ X(attention) X(attention_backward) \
  /* kv_cache_ops */ X(cache_attention) X(kv_write) X(quantize_int8) \
  /* conv */ X(conv2d) X(conv2d_backward) \
  /* batch_norm */ X(batch_norm) \
  /* pool */ X(max_pool2d) X(adaptive_avg_pool2d) \
  /* optim */ X(adam_update) X(sgd_update) X(clip_grad_norm)
// clang-format on
