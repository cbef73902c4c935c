#include "autograd/shape_checks.h"

namespace qkv::autograd::shape {

void same_dtype(const Tensor& a, const Tensor& b, const char* op) {
  check<DTypeError>(a.dtype() == b.dtype(), op, ": dtype mismatch: ", describe(a), " vs ", describe(b),
                    " (convert one with .to(dtype))");
}
void index_dtype(const Tensor& t, const char* op, const char* what) {
  check<DTypeError>(t.dtype() == DType::i32 || t.dtype() == DType::i64, op, ": ", what, " must be int32 or int64, got ",
                    describe(t));
}
void mask_dtype(const Tensor& t, const char* op, const char* what) {
  check<DTypeError>(t.dtype() == DType::b8 || t.dtype() == DType::u8, op, ": ", what, " must be bool or uint8, got ",
                    describe(t));
}

void position_scalar(const Tensor& t, const char* op, const char* what) {
  check<DTypeError>(t.dtype() == DType::i64 && t.numel() == 1, op, ": ", what, " must be one int64, got ", describe(t));
}

void rope_tables(const Tensor& cos, const Tensor& sin, int64_t head_dim, const char* op) {
  check<ShapeError>(cos.dim() == 2 && cos.shape() == sin.shape() && 2 * cos.size(1) <= head_dim, op,
                    ": expected cos and sin tables [positions, R/2] with R at most the head dim ", head_dim, ", got ",
                    describe(cos), " and ", describe(sin));
  check<DTypeError>(is_floating(cos.dtype()) && cos.dtype() == sin.dtype(), op,
                    ": the rotary tables must be of one float dtype, got ", describe(cos), " and ", describe(sin));
}

}  // namespace qkv::autograd::shape
