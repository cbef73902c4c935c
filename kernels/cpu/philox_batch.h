// Philox 4x32-10 for many consecutive blocks at once, written so the compiler vectorizes the
// rounds across blocks (AVX-512 multiplies 16 blocks' words per instruction). Bit-identical to
// philox::block(), which the CUDA kernels use per element.
#pragma once
#include <cstdint>

namespace qkv::kernels::cpu {

inline constexpr int kPhiloxBatch = 16;  // blocks per call: 64 random words

// words[j * 4 + lane] = philox::block(seed, first + j).v[lane] for j < kPhiloxBatch.
inline void philox_batch(uint64_t seed, uint64_t first, uint32_t* words) {
  uint32_t c0[kPhiloxBatch], c1[kPhiloxBatch], c2[kPhiloxBatch], c3[kPhiloxBatch];
  for (int j = 0; j < kPhiloxBatch; ++j) {
    const uint64_t b = first + uint64_t(j);
    c0[j] = uint32_t(b);
    c1[j] = uint32_t(b >> 32);
    c2[j] = 0;
    c3[j] = 0;
  }
  uint32_t k0 = uint32_t(seed), k1 = uint32_t(seed >> 32);
  for (int round = 0; round < 10; ++round) {
#pragma omp simd
    for (int j = 0; j < kPhiloxBatch; ++j) {
      const uint64_t p0 = uint64_t(0xD2511F53u) * c0[j];
      const uint64_t p1 = uint64_t(0xCD9E8D57u) * c2[j];
      const uint32_t n0 = uint32_t(p1 >> 32) ^ c1[j] ^ k0;
      const uint32_t n2 = uint32_t(p0 >> 32) ^ c3[j] ^ k1;
      c1[j] = uint32_t(p1);
      c3[j] = uint32_t(p0);
      c0[j] = n0;
      c2[j] = n2;
    }
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  for (int j = 0; j < kPhiloxBatch; ++j) {
    words[j * 4 + 0] = c0[j];
    words[j * 4 + 1] = c1[j];
    words[j * 4 + 2] = c2[j];
    words[j * 4 + 3] = c3[j];
  }
}

}  // namespace qkv::kernels::cpu
