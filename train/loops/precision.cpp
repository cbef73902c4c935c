#include "train/loops/precision.h"

#include "tensor/error.h"

namespace qkv::loops {

const char* precision_name(Precision p) { return p == Precision::bf16 ? "bf16" : "fp32"; }

PrecisionChoice choose_precision(Precision requested, const Device& /*device*/) {
  // No backend computes in bf16 yet: every request gets fp32.
  return {requested, Precision::fp32};
}

std::string precision_note(const PrecisionChoice& c) {
  if (c.used == c.requested) return "";
  return cat("train.precision: ", precision_name(c.requested), " requested; this run computes in ",
             precision_name(c.used), " because the backend has no ", precision_name(c.requested), " compute yet");
}

}  // namespace qkv::loops
