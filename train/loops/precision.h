// The numeric precision a training run computes in (train.precision). fp32: every op in float32.
// bf16: the official language-model code's bf16 autocast: the forward (and the loss) run under
// an AutocastGuard (autograd/autocast.h), so matmuls, attention and convolutions take bf16 and
// softmax, norms, reductions and losses float32, while weights, gradients and the optimizer
// state stay float32 (no loss scaling: bf16 has float32's range). fp16: the same autocast in
// float16, whose narrow range needs a dynamic loss scale (loss_scale.h). On a CUDA device the
// matmuls run on the tensor cores; on the CPU the 16-bit tensors are computed in float32 around
// each kernel (16-bit storage), so one file trains anywhere. result.json records requested and
// used.
#pragma once
#include <optional>
#include <string>

#include "tensor/device.h"
#include "tensor/dtype.h"

namespace qkv::loops {

enum class Precision { fp32, bf16, f16 };
const char* precision_name(Precision p);  // "fp32" / "bf16" / "fp16"

struct PrecisionChoice {
  Precision requested = Precision::fp32;  // train.precision
  Precision used = Precision::fp32;       // what the run computes in
  bool operator==(const PrecisionChoice&) const = default;
};

// The precision a run on `device` computes in when it asks for `requested`: every backend now
// computes what is asked.
PrecisionChoice choose_precision(Precision requested, const Device& device);

// The autocast dtype of a precision: bf16 or f16, or none for fp32 (an AutocastGuard's argument).
std::optional<DType> autocast_dtype_for(Precision p);

// The line a run prints at its start about its precision ("" for fp32).
std::string precision_note(const PrecisionChoice& choice, const Device& device);

}  // namespace qkv::loops
