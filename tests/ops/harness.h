// The op test harness: one OpCase per op-table row (tests/ops/cases_*.cpp). From a case's
// sample inputs the harness checks, for every op:
//   1. forward against the case's naive reference (plain loops in double) in float64 and
//      float32, on contiguous inputs and on non-contiguous views of the same values;
//   2. gradients against central differences in float64;
//   3. CUDA against CPU (outputs and gradients) when a GPU is visible;
//   4. for rows that take bf16/f16: forward on the sample's values rounded to 16 bits against the
//      reference on those rounded values, bf16 gradients against float64 ones at the same
//      points, and CUDA against CPU in both dtypes (widened or native kernels alike).
// For an op that updates inputs in place (its row's `writes` column), the written inputs are
// compared as well as the outputs, only the read-only inputs are made non-contiguous, and a
// non-contiguous written input must be refused; such ops have no gradient to check.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "autograd/op_table.h"

namespace qkv::test {

// A dense double array in row-major order: what references compute on.
struct Ref {
  Shape shape;
  std::vector<double> v;
  Ref() = default;
  explicit Ref(Shape s, double fill = 0) : shape(std::move(s)), v(size_t(numel(shape)), fill) {}
  int64_t size() const { return int64_t(v.size()); }
  int64_t dim() const { return int64_t(shape.size()); }
  double& at(const std::vector<int64_t>& idx);
  double at(const std::vector<int64_t>& idx) const;
  // Element of this array read at an index of a broadcast shape `out` (NumPy rules).
  double bcast(const std::vector<int64_t>& out_idx) const;
};

// Calls f(index) for every index of `shape` in row-major order.
void for_each_index(const Shape& shape, const std::function<void(const std::vector<int64_t>&)>& f);
Ref ref_of(const Tensor& t);
Shape broadcast(const Shape& a, const Shape& b);

enum class Kind {
  real,      // standard normal
  positive,  // uniform in [0.5, 2]
  index,     // integers in [0, high)
  mask,      // bool, about half true
  away0,     // normal, pushed away from 0 (kinks of relu / division)
  int8,      // int8 integers in [-127, 127] (a quantized KV cache)
  scale,     // float32 in [0.005, 0.02] whatever the float dtype tested (an int8 cache's row scales)
};

struct InputSpec {
  Shape shape;
  Kind kind = Kind::real;
  int64_t high = 0;            // index: exclusive upper bound
  bool differentiable = true;  // include in the gradient check (floating inputs only)
  bool undefined = false;      // an optional input left out
  DType int_dtype = DType::i64;
};
inline InputSpec real(Shape s) { return {std::move(s)}; }
inline InputSpec positive(Shape s) { return {std::move(s), Kind::positive}; }
inline InputSpec away0(Shape s) { return {std::move(s), Kind::away0}; }
inline InputSpec index(Shape s, int64_t high) { return {std::move(s), Kind::index, high, false}; }
inline InputSpec index32(Shape s, int64_t high) {
  InputSpec i = index(std::move(s), high);
  i.int_dtype = DType::i32;
  return i;
}
inline InputSpec mask(Shape s) { return {std::move(s), Kind::mask, 0, false}; }
inline InputSpec int8s(Shape s) { return {std::move(s), Kind::int8, 0, false}; }
inline InputSpec scales(Shape s) { return {std::move(s), Kind::scale, 0, false}; }
inline InputSpec absent() {
  InputSpec s;
  s.undefined = true;
  return s;
}
inline InputSpec constant(InputSpec s) {
  s.differentiable = false;
  return s;
}

struct Sample {
  std::string label;
  std::vector<InputSpec> inputs;
  Attrs attrs = NoAttrs{};
  // false for a sample sized to reach the CUDA kernels' multi-block, multi-tile and split paths:
  // central differences over all its elements would cost minutes on the CPU. Its analytic
  // gradients are still compared CUDA against CPU.
  bool numeric_grad = true;
  // Kept under QKV_HARNESS_SMALL=1 although sized as above: the one sample of a CUDA kernel path
  // or block regime the small samples do not reach (a split-KV decode, rows wider than a warp),
  // chosen by the kernel's dispatch so that CI's emulated run compares every path with the CPU
  // (scripts/emu-coverage-required.txt).
  bool small_run = false;
};

// A sample sized for a CUDA kernel path that the small run keeps (Sample::small_run).
inline Sample kernel_path(Sample s) {
  s.numeric_grad = false;
  s.small_run = true;
  return s;
}

// Returns the expected outputs (a prefix of them is enough for ops that write no input). For an
// op that writes inputs: every output, then the expected new value of every written input in
// input order (an empty Ref for a written input left out).
using Reference = std::function<std::vector<Ref>(const std::vector<Ref>& in, const Attrs& attrs)>;

struct OpCase {
  std::vector<Sample> samples;
  Reference reference;
  bool gradcheck = true;  // false for ops whose row has no backward
  double f32_tolerance = 2e-5;
  // CUDA against the CPU in float32, where both differ from float64 by their summation order;
  // 0: f32_tolerance. (The float64 comparison, at 1e-9, is what catches a wrong term.)
  double cuda_f32_tolerance = 0;
  // bf16/f16 forward (relative and absolute): a few roundings of 2^-9 (bf16) by default; the
  // gradients, taken through several 16-bit ops, get four times as much.
  double low_tolerance = 1.6e-2;
  // Float dtypes to test forward in (the row's dtypes may allow fewer).
  std::vector<DType> float_dtypes = {DType::f64, DType::f32};
};

// What the harness found for one op (printed as one line of the harness table).
struct CaseReport {
  int samples = 0, forward_checks = 0, noncontig_checks = 0, grad_checks = 0, cuda_checks = 0, low_checks = 0;
  int inplace_refusals = 0;  // non-contiguous written inputs refused
  bool cuda_skipped = true;
  std::string line(const char* op) const;
};

// True under QKV_HARNESS_SMALL=1: the samples sized for the CUDA kernels' multi-tile paths
// (numeric_grad false) are left out but for one per kernel path (small_run), for runs under
// compute-sanitizer and on the emulated device, 10-100x slower.
bool small_samples_only();

// Runs every check of `c` for `op`; failures are reported through doctest CHECKs.
CaseReport run_case(autograd::OpId op, const OpCase& c);

}  // namespace qkv::test
