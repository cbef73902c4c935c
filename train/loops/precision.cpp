#include "train/loops/precision.h"

#include "tensor/error.h"

namespace qkv::loops {

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::bf16: return "bf16";
    case Precision::f16: return "fp16";
    default: return "fp32";
  }
}

PrecisionChoice choose_precision(Precision requested, const Device& /*device*/) { return {requested, requested}; }

std::optional<DType> autocast_dtype_for(Precision p) {
  switch (p) {
    case Precision::bf16: return DType::bf16;
    case Precision::f16: return DType::f16;
    default: return std::nullopt;
  }
}

std::string precision_note(const PrecisionChoice& c, const Device& device) {
  if (c.used == Precision::fp32) return "";
  const char* name = precision_name(c.used);
  return cat("train.precision: ", name, " autocast: matmuls, attention and convolutions in ", name,
             ", softmax, norms and losses in float32, float32 weights and optimizer state; ",
             c.used == Precision::f16 ? "a dynamic loss scale keeps float16 gradients in range; " : "",
             device.is_cuda() ? cat("matmuls on the tensor cores (`qkvlab ops` lists each op's ", name, " kernel)")
                              : cat("on the CPU each ", name, " op computes in float32 (", name, " storage)"));
}

}  // namespace qkv::loops
