// Philox 4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11): a
// counter-based generator. Element i of a draw that starts at block `offset` comes from block
// offset + i/4, lane i%4, so any thread on any device computes it independently and a stream
// resumes exactly from its counter. Host and device share this header, so CPU and CUDA draw
// identical bits.
#pragma once
#include <cmath>
#include <cstdint>

#include "tensor/half.h"

namespace qkv::philox {

struct U32x4 {
  uint32_t v[4];
};

QKV_HD void mulhilo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
  uint64_t p = uint64_t(a) * uint64_t(b);
  hi = uint32_t(p >> 32);
  lo = uint32_t(p);
}

// The raw bijection: 10 rounds over a 128-bit counter with a 64-bit key.
QKV_HD U32x4 philox4x32_10(U32x4 ctr, uint32_t k0, uint32_t k1) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    mulhilo(kM0, ctr.v[0], hi0, lo0);
    mulhilo(kM1, ctr.v[2], hi1, lo1);
    ctr = U32x4{{hi1 ^ ctr.v[1] ^ k0, lo1, hi0 ^ ctr.v[3] ^ k1, lo0}};
    k0 += kW0;
    k1 += kW1;
  }
  return ctr;
}

// The four 32-bit words of block `block` of the stream keyed by `seed`.
QKV_HD U32x4 block(uint64_t seed, uint64_t block) {
  return philox4x32_10(U32x4{{uint32_t(block), uint32_t(block >> 32), 0u, 0u}}, uint32_t(seed), uint32_t(seed >> 32));
}

// Element i of a stream starting at block `offset`: its 32 random bits.
QKV_HD uint32_t bits(uint64_t seed, uint64_t offset, uint64_t i) { return block(seed, offset + i / 4).v[i % 4]; }

// Uniform in [0, 1): float keeps 24 bits, double uses all 32 (both exact, so CPU == CUDA).
QKV_HD float to_unit_float(uint32_t x) { return float(x >> 8) * (1.0f / 16777216.0f); }
QKV_HD double to_unit_double(uint32_t x) { return double(x) * (1.0 / 4294967296.0); }

// Standard normal for element i: Box-Muller on lanes (0,1) or (2,3) of its block, in double.
QKV_HD double normal(uint64_t seed, uint64_t offset, uint64_t i) {
  U32x4 b = block(seed, offset + i / 4);
  const int lane = int(i % 4), pair = lane & ~1;
  const double u1 = (double(b.v[pair]) + 1.0) * (1.0 / 4294967296.0);  // (0, 1]: log is finite
  const double u2 = double(b.v[pair + 1]) * (1.0 / 4294967296.0);
  const double r = std::sqrt(-2.0 * std::log(u1));
  const double theta = 6.283185307179586476925286766559 * u2;
  return (lane & 1) ? r * std::sin(theta) : r * std::cos(theta);
}

}  // namespace qkv::philox
