// Philox 4x32-10 for many consecutive blocks at once, vectorized across blocks (AVX-512: 16
// blocks' words per instruction, two such sets interleaved; elsewhere the compiler vectorizes
// the plain rounds). Bit-identical to philox::block(), which the CUDA kernels use per element.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#ifdef __AVX512F__
#include <immintrin.h>
#endif

namespace qkv::kernels::cpu {

inline constexpr int kPhiloxBatch = 32;  // blocks per call: 128 random words

#ifdef __AVX512F__
namespace philox_avx512 {

// Sixteen consecutive blocks' four words, word w of block j in lane j of v[w].
struct Lanes {
  __m512i v[4];
};

// The counters first + j, j < 16: 64-bit sums split into their low (v0) and high (v1) words.
inline Lanes counters(uint64_t first) {
  const __m512i base = _mm512_set1_epi64(int64_t(first));
  const __m512i lo8 = _mm512_add_epi64(base, _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7));
  const __m512i hi8 = _mm512_add_epi64(base, _mm512_setr_epi64(8, 9, 10, 11, 12, 13, 14, 15));
  Lanes x;
  x.v[0] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi64_epi32(lo8)), _mm512_cvtepi64_epi32(hi8), 1);
  x.v[1] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi64_epi32(_mm512_srli_epi64(lo8, 32))),
                              _mm512_cvtepi64_epi32(_mm512_srli_epi64(hi8, 32)), 1);
  x.v[2] = x.v[3] = _mm512_setzero_si512();
  return x;
}

// One round. GCC does not vectorize the 32x32 -> 64-bit products; vpmuludq does 8 per
// instruction (the even lanes, then the odd ones shifted down).
inline void mix_round(Lanes& x, __m512i k0, __m512i k1) {
  const __m512i m0 = _mm512_set1_epi64(0xD2511F53u), m1 = _mm512_set1_epi64(0xCD9E8D57u);
  constexpr __mmask16 kOdd = 0xAAAA;
  const __m512i e0 = _mm512_mul_epu32(x.v[0], m0), o0 = _mm512_mul_epu32(_mm512_srli_epi64(x.v[0], 32), m0);
  const __m512i e1 = _mm512_mul_epu32(x.v[2], m1), o1 = _mm512_mul_epu32(_mm512_srli_epi64(x.v[2], 32), m1);
  const __m512i hi0 = _mm512_mask_blend_epi32(kOdd, _mm512_srli_epi64(e0, 32), o0);
  const __m512i lo0 = _mm512_mask_blend_epi32(kOdd, e0, _mm512_slli_epi64(o0, 32));
  const __m512i hi1 = _mm512_mask_blend_epi32(kOdd, _mm512_srli_epi64(e1, 32), o1);
  const __m512i lo1 = _mm512_mask_blend_epi32(kOdd, e1, _mm512_slli_epi64(o1, 32));
  x.v[0] = _mm512_xor_si512(_mm512_xor_si512(hi1, x.v[1]), k0);
  x.v[2] = _mm512_xor_si512(_mm512_xor_si512(hi0, x.v[3]), k1);
  x.v[1] = lo1;
  x.v[3] = lo0;
}

// words[4 j + w] = lane j of v[w]. Within each 128-bit lane, a 4 x 4 transpose gives e, f, g, h
// holding blocks 4k, 4k + 1, 4k + 2, 4k + 3 in lane k; then the lanes are transposed.
inline void store_blocks(const Lanes& x, uint32_t* words) {
  const __m512i a = _mm512_unpacklo_epi32(x.v[0], x.v[1]), b = _mm512_unpackhi_epi32(x.v[0], x.v[1]);
  const __m512i c = _mm512_unpacklo_epi32(x.v[2], x.v[3]), d = _mm512_unpackhi_epi32(x.v[2], x.v[3]);
  const __m512i e = _mm512_unpacklo_epi64(a, c), f = _mm512_unpackhi_epi64(a, c);
  const __m512i g = _mm512_unpacklo_epi64(b, d), h = _mm512_unpackhi_epi64(b, d);
  const __m512i ef_lo = _mm512_shuffle_i32x4(e, f, 0x44), ef_hi = _mm512_shuffle_i32x4(e, f, 0xEE);
  const __m512i gh_lo = _mm512_shuffle_i32x4(g, h, 0x44), gh_hi = _mm512_shuffle_i32x4(g, h, 0xEE);
  _mm512_storeu_si512(words, _mm512_shuffle_i32x4(ef_lo, gh_lo, 0x88));
  _mm512_storeu_si512(words + 16, _mm512_shuffle_i32x4(ef_lo, gh_lo, 0xDD));
  _mm512_storeu_si512(words + 32, _mm512_shuffle_i32x4(ef_hi, gh_hi, 0x88));
  _mm512_storeu_si512(words + 48, _mm512_shuffle_i32x4(ef_hi, gh_hi, 0xDD));
}

}  // namespace philox_avx512
#endif

// words[j * 4 + lane] = philox::block(seed, first + j).v[lane] for j < kPhiloxBatch.
inline void philox_batch(uint64_t seed, uint64_t first, uint32_t* words) {
  uint32_t k0 = uint32_t(seed), k1 = uint32_t(seed >> 32);
#ifdef __AVX512F__
  // Two independent sets of sixteen blocks, round by round: a round's multiply, blend and xor
  // form a chain of latencies that one set alone leaves the core waiting on.
  using namespace philox_avx512;
  static_assert(kPhiloxBatch == 32, "two 512-bit vectors of 32-bit words per Philox word");
  Lanes a = counters(first), b = counters(first + 16);
  for (int r = 0; r < 10; ++r) {
    const __m512i key0 = _mm512_set1_epi32(int(k0)), key1 = _mm512_set1_epi32(int(k1));
    mix_round(a, key0, key1);
    mix_round(b, key0, key1);
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  store_blocks(a, words);
  store_blocks(b, words + 64);
#else
  uint32_t c0[kPhiloxBatch], c1[kPhiloxBatch], c2[kPhiloxBatch] = {}, c3[kPhiloxBatch] = {};
  for (int j = 0; j < kPhiloxBatch; ++j) {
    const uint64_t b = first + uint64_t(j);
    c0[j] = uint32_t(b);
    c1[j] = uint32_t(b >> 32);
  }
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
#endif
}

// u / 2^32 < p exactly when the integer u < ceil(p 2^32): a draw's comparison without floating
// point (dropout keeps element i when word i >= the threshold of p).
inline uint64_t unit_threshold(double p) { return uint64_t(std::ceil(std::clamp(p, 0.0, 1.0) * 4294967296.0)); }

// The words of a stream read in increasing element order by one thread: element i's word is
// word i % kWords of the batch i / kWords, generated when first asked for.
class PhiloxWords {
 public:
  static constexpr int64_t kWords = 4 * kPhiloxBatch;
  PhiloxWords(uint64_t seed, uint64_t offset) : seed_(seed), offset_(offset) {}
  // Words of elements [i, i + n), n at most the rest of i's batch (kWords - i % kWords).
  const uint32_t* at(int64_t i) {
    const int64_t batch = i / kWords;
    if (batch != batch_) {
      philox_batch(seed_, offset_ + uint64_t(batch) * kPhiloxBatch, words_);
      batch_ = batch;
    }
    return words_ + i % kWords;
  }

 private:
  uint64_t seed_, offset_;
  int64_t batch_ = -1;
  alignas(64) uint32_t words_[kWords];
};

}  // namespace qkv::kernels::cpu
