// Element types: float32 / float64 (compute), bfloat16 / float16 (storage and conversion),
// int32 / int64 (indices), uint8 / bool (masks), int8 (quantized storage: a KV cache with
// per-row float32 scales). Visitors turn a runtime DType into a C++ type.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "tensor/error.h"
#include "tensor/half.h"

namespace qkv {

enum class DType : uint8_t { f32, f64, bf16, f16, i32, i64, u8, b8, i8 };
inline constexpr int kNumDTypes = 9;

size_t dtype_size(DType dt);
const char* dtype_name(DType dt);          // "float32", ...
const char* dtype_short_name(DType dt);    // "f32", ...
DType parse_dtype(std::string_view name);  // accepts "float32", "f32", "fp32", "bf16", ...
bool is_floating(DType dt);
bool is_integral(DType dt);  // int32, int64, uint8, bool, int8
std::ostream& operator<<(std::ostream& os, DType dt);

// A set of dtypes, used by the op table to say what an op accepts.
struct DTypeSet {
  uint32_t bits = 0;
  constexpr DTypeSet() = default;
  constexpr DTypeSet(DType d) : bits(1u << unsigned(d)) {}
  constexpr DTypeSet operator|(DTypeSet o) const {
    DTypeSet s;
    s.bits = bits | o.bits;
    return s;
  }
  constexpr bool contains(DType d) const { return (bits >> unsigned(d)) & 1u; }
  std::string to_string(bool short_names = false) const;  // "float32,float64" or "f32,f64"
};
inline constexpr DTypeSet kFloat = DTypeSet(DType::f32) | DType::f64;
inline constexpr DTypeSet kIndex = DTypeSet(DType::i32) | DType::i64;
inline constexpr DTypeSet kNumeric = kFloat | kIndex;
inline constexpr DTypeSet kMask = DTypeSet(DType::b8) | DType::u8;
inline constexpr DTypeSet kLowFloat = DTypeSet(DType::bf16) | DType::f16;  // 16-bit floats
inline constexpr DTypeSet kAnyFloat = kFloat | kLowFloat;
inline constexpr DTypeSet kAnyNumeric = kNumeric | kLowFloat;
// What a KV cache stores: any float, or int8 with row scales.
inline constexpr DTypeSet kCacheDTypes = kAnyFloat | DType::i8;
inline constexpr DTypeSet kAllDTypes = kNumeric | kMask | kLowFloat | DType::i8;

template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::f32; }
template <> constexpr DType dtype_of<double>() { return DType::f64; }
template <> constexpr DType dtype_of<bf16>() { return DType::bf16; }
template <> constexpr DType dtype_of<f16>() { return DType::f16; }
template <> constexpr DType dtype_of<int32_t>() { return DType::i32; }
template <> constexpr DType dtype_of<int64_t>() { return DType::i64; }
template <> constexpr DType dtype_of<uint8_t>() { return DType::u8; }
template <> constexpr DType dtype_of<bool>() { return DType::b8; }
template <> constexpr DType dtype_of<int8_t>() { return DType::i8; }

// visit_dtype(dt, [&]<class T>() { ... }) calls the lambda with T = the C++ element type.
template <class F> decltype(auto) visit_dtype(DType dt, F&& f) {
  switch (dt) {
    case DType::f32: return f.template operator()<float>();
    case DType::f64: return f.template operator()<double>();
    case DType::bf16: return f.template operator()<bf16>();
    case DType::f16: return f.template operator()<f16>();
    case DType::i32: return f.template operator()<int32_t>();
    case DType::i64: return f.template operator()<int64_t>();
    case DType::u8: return f.template operator()<uint8_t>();
    case DType::b8: return f.template operator()<bool>();
    case DType::i8: return f.template operator()<int8_t>();
  }
  throw DTypeError("visit_dtype: invalid dtype value");
}

// Visitors restricted to the types a kernel supports; `op` names the caller in the error.
template <class F> decltype(auto) visit_float(DType dt, const char* op, F&& f) {
  switch (dt) {
    case DType::f32: return f.template operator()<float>();
    case DType::f64: return f.template operator()<double>();
    default: throw DTypeError(cat(op, ": expected float32 or float64, got ", dtype_name(dt)));
  }
}
// Kernels that read 16-bit floats in place: T is the stored type, compute_t<T> what they compute in.
template <class F> decltype(auto) visit_any_float(DType dt, const char* op, F&& f) {
  switch (dt) {
    case DType::f32: return f.template operator()<float>();
    case DType::f64: return f.template operator()<double>();
    case DType::bf16: return f.template operator()<bf16>();
    case DType::f16: return f.template operator()<f16>();
    default: throw DTypeError(cat(op, ": expected float32, float64, bfloat16 or float16, got ", dtype_name(dt)));
  }
}
template <class T> struct ComputeType { using type = T; };
template <> struct ComputeType<bf16> { using type = float; };
template <> struct ComputeType<f16> { using type = float; };
template <class T> using compute_t = typename ComputeType<T>::type;  // float for bf16/f16

template <class F> decltype(auto) visit_index(DType dt, const char* op, F&& f) {
  switch (dt) {
    case DType::i32: return f.template operator()<int32_t>();
    case DType::i64: return f.template operator()<int64_t>();
    default: throw DTypeError(cat(op, ": expected int32 or int64 indices, got ", dtype_name(dt)));
  }
}
template <class F> decltype(auto) visit_numeric(DType dt, const char* op, F&& f) {
  switch (dt) {
    case DType::f32: return f.template operator()<float>();
    case DType::f64: return f.template operator()<double>();
    case DType::i32: return f.template operator()<int32_t>();
    case DType::i64: return f.template operator()<int64_t>();
    default: throw DTypeError(cat(op, ": expected float32, float64, int32 or int64, got ", dtype_name(dt)));
  }
}

}  // namespace qkv
