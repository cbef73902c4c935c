// Model FLOP utilization: the FLOPs of one training token of a GPT and the device's measured
// float32 GEMM rate, the peak MFU is reported against when no peak is configured.
#pragma once
#include <cstdint>

#include "nn/models/gpt.h"

namespace qkv::loops {

// FLOPs of one training token (forward and backward): 6 per parameter plus the attention
// scores and mixing, 12 x layers x T x d (PaLM's accounting).
double lm_train_flops_per_token(const nn::GPT& model, int64_t seq_len);

// Float32 GEMM FLOP/s of the device, timed on an n^3 matmul (best of `reps` after a warm-up).
double measure_gemm_flops(const Device& device, int64_t n = 1024, int reps = 4);

}  // namespace qkv::loops
