#include <doctest/doctest.h>

#include <cmath>

#include "tensor/tensor.h"

using namespace qkv;

TEST_CASE("float16: every bit pattern survives a round trip through float") {
  for (uint32_t b = 0; b < 65536; ++b) {
    f16 h;
    h.bits = uint16_t(b);
    const float f = float(h);
    if (std::isnan(f)) {
      CHECK(std::isnan(float(f16(f))));
      continue;
    }
    REQUIRE_MESSAGE(f16(f).bits == h.bits, "bits 0x", std::hex, b);
  }
}

TEST_CASE("float16: rounding is to nearest, ties to even, with overflow and subnormals") {
  CHECK(float(f16(1.0f + std::ldexp(1.0f, -11))) == 1.0f);                             // tie -> even
  CHECK(float(f16(1.0f + 3 * std::ldexp(1.0f, -11))) == 1.0f + std::ldexp(1.0f, -9));  // tie -> even
  CHECK(float(f16(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20))) == 1.0f + std::ldexp(1.0f, -10));
  CHECK(float(f16(65504.0f)) == 65504.0f);
  CHECK(std::isinf(float(f16(65520.0f))));
  CHECK(float(f16(65519.0f)) == 65504.0f);
  CHECK(float(f16(std::ldexp(1.0f, -24))) == std::ldexp(1.0f, -24));  // smallest subnormal
  CHECK(float(f16(std::ldexp(1.0f, -25))) == 0.0f);                   // tie -> even (0)
  CHECK(float(f16(3 * std::ldexp(1.0f, -26))) == std::ldexp(1.0f, -24));
  CHECK(float(f16(-2.5f)) == -2.5f);
  CHECK(std::signbit(float(f16(-0.0f))));
}

TEST_CASE("bfloat16: round trip of every bit pattern and ties to even") {
  for (uint32_t b = 0; b < 65536; ++b) {
    bf16 h;
    h.bits = uint16_t(b);
    const float f = float(h);
    if (std::isnan(f)) {
      CHECK(std::isnan(float(bf16(f))));
      continue;
    }
    REQUIRE(bf16(f).bits == h.bits);
  }
  CHECK(float(bf16(1.0f + std::ldexp(1.0f, -8))) == 1.0f);
  CHECK(float(bf16(1.0f + 3 * std::ldexp(1.0f, -8))) == 1.0f + std::ldexp(1.0f, -6));
  CHECK(float(bf16(3.14159265f)) == 3.140625f);
}

TEST_CASE("dtype names parse and bad names are rejected with the accepted list") {
  CHECK(parse_dtype("bf16") == DType::bf16);
  CHECK(parse_dtype("float32") == DType::f32);
  CHECK(parse_dtype("fp16") == DType::f16);
  CHECK(dtype_size(DType::bf16) == 2);
  CHECK(dtype_size(DType::i64) == 8);
  CHECK_THROWS_WITH_AS(parse_dtype("float8"), doctest::Contains("unknown dtype 'float8'"), DTypeError);
  CHECK(kFloat.contains(DType::f64));
  CHECK_FALSE(kFloat.contains(DType::i32));
  CHECK(kIndex.to_string() == "int32,int64");
}

TEST_CASE("devices parse from strings") {
  CHECK(Device("cpu").is_cpu());
  CHECK(Device("cuda:1").index == 1);
  CHECK(Device("cuda").is_cuda());
  CHECK_THROWS_AS(Device("gpu"), DeviceError);
  CHECK_THROWS_AS(Device("cuda:x"), DeviceError);
  CHECK(Device("cuda:3").str() == "cuda:3");
}
