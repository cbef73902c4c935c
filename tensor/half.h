// bfloat16 and IEEE float16 storage types with round-to-nearest-even conversion from float.
// Usable from host and device code, so CPU and CUDA convert bit-identically.
#pragma once
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define QKV_HD __host__ __device__ __forceinline__
#else
#define QKV_HD inline
#endif

namespace qkv {

QKV_HD uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}
QKV_HD float bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

struct bf16 {
  uint16_t bits = 0;
  bf16() = default;
  QKV_HD explicit bf16(float f) : bits(from_float(f)) {}
  QKV_HD explicit operator float() const { return bits_float(uint32_t(bits) << 16); }
  QKV_HD static uint16_t from_float(float f) {
    uint32_t u = float_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // quiet NaN
    u += 0x7fffu + ((u >> 16) & 1u);                                         // nearest even
    return uint16_t(u >> 16);
  }
};

struct f16 {
  uint16_t bits = 0;
  f16() = default;
  QKV_HD explicit f16(float f) : bits(from_float(f)) {}
  QKV_HD explicit operator float() const { return bits_float(to_float_bits(bits)); }

  QKV_HD static uint16_t from_float(float f) {
    uint32_t u = float_bits(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7fffffffu;
    if (a >= 0x7f800000u) return uint16_t(sign | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0u));
    if (a >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // rounds to >= 65520: overflow
    if (a < 0x38800000u) {                                  // result is subnormal or zero
      if (a < 0x33000000u) return uint16_t(sign);           // below half the smallest subnormal
      uint32_t mant = (a & 0x7fffffu) | 0x800000u;
      int shift = 126 - int(a >> 23);  // 14..24
      uint32_t half_ulp = 1u << (shift - 1);
      uint32_t rest = mant & ((1u << shift) - 1);
      uint32_t r = mant >> shift;
      if (rest > half_ulp || (rest == half_ulp && (r & 1u))) ++r;
      return uint16_t(sign | r);
    }
    uint32_t r = a - 0x38000000u;  // rebias exponent 127 -> 15
    r += 0xfffu + ((r >> 13) & 1u);
    return uint16_t(sign | (r >> 13));
  }
  QKV_HD static uint32_t to_float_bits(uint16_t h) {
    uint32_t sign = uint32_t(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    if (exp == 0x1fu) return sign | 0x7f800000u | (mant << 13);
    if (exp == 0) {
      if (mant == 0) return sign;
      int e = -1;  // normalize the subnormal
      do {
        mant <<= 1;
        ++e;
      } while ((mant & 0x400u) == 0);
      return sign | (uint32_t(112 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
    return sign | ((exp + 112u) << 23) | (mant << 13);
  }
};

}  // namespace qkv
