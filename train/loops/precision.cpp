#include "train/loops/precision.h"

#include "tensor/error.h"

namespace qkv::loops {

const char* precision_name(Precision p) { return p == Precision::bf16 ? "bf16" : "fp32"; }

PrecisionChoice choose_precision(Precision requested, const Device& /*device*/) { return {requested, requested}; }

std::optional<DType> autocast_dtype_for(Precision p) {
  return p == Precision::bf16 ? std::optional<DType>(DType::bf16) : std::nullopt;
}

std::string precision_note(const PrecisionChoice& c, const Device& device) {
  if (c.used != Precision::bf16) return "";
  return cat(
      "train.precision: bf16 autocast: matmuls, attention and convolutions in bf16, softmax, norms and losses "
      "in float32, float32 weights and optimizer state; ",
      device.is_cuda() ? "matmuls on the tensor cores (`qkvlab ops` lists each op's bf16 kernel)"
                       : "on the CPU each bf16 op computes in float32 (bf16 storage)");
}

}  // namespace qkv::loops
