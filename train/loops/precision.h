// The numeric precision a training run computes in (train.precision). fp32 is what every backend
// computes; bf16 is the official language-model code's bf16 autocast, which no backend has yet,
// so a run that asks for it computes in fp32 and says so (precision_note), and its result.json
// records both.
//
// Where bf16 hooks in: choose_precision decides what a run gets. Once a backend computes matmul
// and attention in bf16 (float32 weights, optimizer and reductions, as autocast keeps them), let
// it return bf16 for that device, and make the loops honour the precision they are given
// (LmTrainOptions::precision in lm_loop.h; the forward passes there are marked).
#pragma once
#include <string>

#include "tensor/device.h"

namespace qkv::loops {

enum class Precision { fp32, bf16 };
const char* precision_name(Precision p);  // "fp32" / "bf16"

struct PrecisionChoice {
  Precision requested = Precision::fp32;  // train.precision
  Precision used = Precision::fp32;       // what the run computes in
  bool operator==(const PrecisionChoice&) const = default;
};

// The precision a run on `device` computes in when it asks for `requested`.
PrecisionChoice choose_precision(Precision requested, const Device& device);

// The line a run prints at its start when it does not get what it asked for; "" when it does.
std::string precision_note(const PrecisionChoice& choice);

}  // namespace qkv::loops
