// The CPU backend's GEMM library: oneDNN (Debian's libdnnl-dev) when the build has it. Its
// float32 GEMMs (its matmul primitive, and sgemm for weight gradients) run at about 95% of the
// machine's FMA peak where Eigen's GEMM reaches about 70%, and its bfloat16 matmul multiplies
// with AVX512_BF16's dot products, accumulating in float32, at twice the float32 rate.
// matmul.cpp calls it for the products big enough to pay for a library call and keeps Eigen for
// the small ones, for float64, and for builds without it.
//
// QKV_CPU_GEMM=eigen in the environment (or set_library_gemm(false)) turns the library off, so
// that a benchmark can time both in one run.
#pragma once
#include <cstdint>

#include "tensor/dtype.h"

namespace qkv::kernels::cpu {

// op(X) of one product, rows x cols: stored row-major with leading dimension ld (trans false),
// or as the transpose of a row-major cols x rows matrix with leading dimension ld (trans true).
struct GemmMatrix {
  const void* data = nullptr;
  int64_t rows = 0, cols = 0, ld = 0;
  bool trans = false;
};

// Whether float32 products go to the library: built with it and not turned off.
bool library_sgemm_enabled();
// Whether bfloat16 products do: as above, and the CPU has AVX512_BF16 (without it bf16 GEMMs are
// computed on float32 copies, which is faster than the library's emulation).
bool library_bf16_gemm_enabled();
// Turns the library on or off for this process (when built with it); returns the previous state.
bool set_library_gemm(bool on);
// "oneDNN 2.6.3 (float32 matmul and sgemm; bfloat16 matmul on AVX512_BF16)", or why not ("Eigen:
// built without oneDNN").
const char* library_gemm_description();

// c [a.rows, b.cols], row-major and contiguous, = op(A) op(B) (+ bias [b.cols] on every row) in
// float32. Only when library_sgemm_enabled().
void library_sgemm(const GemmMatrix& a, const GemmMatrix& b, float* c, const float* bias = nullptr);
// c += op(A) op(B) in float32 (c as above): the library adds the product to c as it writes it,
// so no product is stored and read back. Only when library_sgemm_enabled().
void library_sgemm_accumulate(const GemmMatrix& a, const GemmMatrix& b, float* c);
// The same with bfloat16 A and B, float32 accumulation, the bias (float32 or bf16) added to the
// accumulator, and c of c_dtype (f32 or bf16, rounded once). Only when library_bf16_gemm_enabled().
void library_gemm_bf16(const GemmMatrix& a, const GemmMatrix& b, void* c, DType c_dtype, const void* bias = nullptr,
                       DType bias_dtype = DType::f32);

}  // namespace qkv::kernels::cpu
