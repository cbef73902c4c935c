// Model FLOP utilization: the FLOPs of one training token of a GPT, and the peak it is reported
// against: configured, a known GPU's dense peak for the run's precision, or a measured GEMM.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "nn/models/gpt.h"
#include "train/loops/precision.h"

namespace qkv::loops {

// FLOPs of one training token (forward and backward): 6 per parameter plus the attention
// scores and mixing, 12 x layers x T x d (PaLM's accounting).
double lm_train_flops_per_token(const nn::GPTConfig& config, int64_t seq_len);

// GEMM FLOP/s of the device in `dtype`, timed on an n^3 matmul (best of `reps` after a warm-up).
double measure_gemm_flops(const Device& device, int64_t n = 1024, int reps = 4, DType dtype = DType::f32);

// The data-sheet dense peak (no sparsity) of a known GPU, by its product name: bf16 (fp16 has the
// same rate) on the tensor cores, or float32 without them (fp32 runs use no TF32). nullopt for
// other devices.
std::optional<double> known_peak_flops(std::string_view device_name, Precision precision);

struct PeakFlops {
  double flops = 0;
  std::string source;  // "configured", "NVIDIA H200 bf16 data sheet", "measured bf16 GEMM"
};
// The peak MFU is reported against: `configured_tflops` when > 0 (train.peak_tflops), else the
// table, else a GEMM measured on the device in the precision it computes in (float32 on a CPU).
PeakFlops peak_flops(const Device& device, Precision precision, double configured_tflops);

}  // namespace qkv::loops
