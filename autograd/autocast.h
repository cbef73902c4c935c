// Mixed precision by autocast: while an AutocastGuard with a 16-bit dtype is active on a thread,
// call_op casts each op's float inputs as the op table's `amp` column says (op_table.h), so a
// model written in float32 runs its matmuls, attention and convolutions in bf16 (or f16) and its
// softmax, norms, reductions and losses in float32, while the parameters and the optimizer state
// stay float32 (the casts are ops of the graph: gradients reach the float32 leaves as float32).
// Backward never autocasts: each backward op sees the dtypes its forward produced.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "tensor/tensor.h"

namespace qkv {

namespace autograd {

struct OpInfo;

// An op row's autocast policy (the `amp` column).
enum AmpPolicy : uint8_t {
  kAmpLow,   // float32 inputs are cast to the autocast dtype
  kAmpF32,   // bf16/f16 inputs are cast to float32
  kAmpKeep,  // inputs keep their dtype; mixed float dtypes are promoted to the widest
  kAmpNone,  // never cast
};

// How an op row's kernels take bf16/f16 (the `lowp` column).
enum LowPrecision : uint8_t {
  kLowWiden,   // computed in float32 around the kernel, on every device
  kLowCuda,    // the CUDA kernel computes on them directly; the CPU widens
  kLowNative,  // every kernel takes them itself
  kLowGemm,    // the CUDA kernel takes them; the CPU kernel takes bf16 where its GEMM library
               // computes bf16 (oneDNN on AVX512_BF16), and widens otherwise
};

const char* amp_name(AmpPolicy p);      // "low", "fp32", "keep", "none"
const char* lowp_name(LowPrecision l);  // "widen", "cuda", "native", "gemm"

// Casts `in` in place as `info`'s policy says under the active autocast dtype (no-op without
// one). Casts are recorded in the graph like any op.
void autocast_inputs(const OpInfo& info, std::vector<Tensor>& in);

// The dtype a kAmpKeep op promotes mixed float inputs to: the widest of the inputs with at least
// one dimension (0-dim tensors follow them, like a scalar), float32 for bf16 with f16. Undefined
// inputs and non-float ones are ignored; nullopt when nothing needs casting.
std::optional<DType> promoted_dtype(const std::vector<Tensor>& in);

}  // namespace autograd

// The thread's autocast dtype: bf16 or f16 while an AutocastGuard is active, nullopt otherwise.
std::optional<DType> autocast_dtype();

// Enables autocast to `low` (bf16 or f16) for the guard's lifetime; nullopt disables it (the
// backward engine does that). Nests: the destructor restores the previous state.
class AutocastGuard {
 public:
  explicit AutocastGuard(std::optional<DType> low);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  std::optional<DType> prev_;
};

}  // namespace qkv
