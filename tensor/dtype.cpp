#include "tensor/dtype.h"

#include <ostream>

namespace qkv {

size_t dtype_size(DType dt) {
  switch (dt) {
    case DType::f32:
    case DType::i32: return 4;
    case DType::f64:
    case DType::i64: return 8;
    case DType::bf16:
    case DType::f16: return 2;
    case DType::u8:
    case DType::b8:
    case DType::i8: return 1;
  }
  return 0;
}

const char* dtype_name(DType dt) {
  switch (dt) {
    case DType::f32: return "float32";
    case DType::f64: return "float64";
    case DType::bf16: return "bfloat16";
    case DType::f16: return "float16";
    case DType::i32: return "int32";
    case DType::i64: return "int64";
    case DType::u8: return "uint8";
    case DType::b8: return "bool";
    case DType::i8: return "int8";
  }
  return "invalid";
}

DType parse_dtype(std::string_view s) {
  if (s == "float32" || s == "f32" || s == "fp32" || s == "float") return DType::f32;
  if (s == "float64" || s == "f64" || s == "fp64" || s == "double") return DType::f64;
  if (s == "bfloat16" || s == "bf16") return DType::bf16;
  if (s == "float16" || s == "f16" || s == "fp16" || s == "half") return DType::f16;
  if (s == "int32" || s == "i32") return DType::i32;
  if (s == "int64" || s == "i64" || s == "long") return DType::i64;
  if (s == "uint8" || s == "u8") return DType::u8;
  if (s == "bool" || s == "b8") return DType::b8;
  if (s == "int8" || s == "i8") return DType::i8;
  throw DTypeError(cat("unknown dtype '", s,
                       "': expected one of float32, float64, bfloat16, float16, int32, int64, uint8, bool, int8"));
}

bool is_floating(DType dt) { return dt == DType::f32 || dt == DType::f64 || dt == DType::bf16 || dt == DType::f16; }
bool is_integral(DType dt) { return !is_floating(dt); }

std::ostream& operator<<(std::ostream& os, DType dt) { return os << dtype_name(dt); }

const char* dtype_short_name(DType dt) {
  switch (dt) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::bf16: return "bf16";
    case DType::f16: return "f16";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
    case DType::u8: return "u8";
    case DType::b8: return "bool";
    case DType::i8: return "i8";
  }
  return "?";
}

std::string DTypeSet::to_string(bool short_names) const {
  std::string s;
  for (int i = 0; i < kNumDTypes; ++i) {
    if (!contains(DType(i))) continue;
    if (!s.empty()) s += ",";
    s += short_names ? dtype_short_name(DType(i)) : dtype_name(DType(i));
  }
  return s;
}

}  // namespace qkv
