#include "kernels/cpu/skinny_gemm.h"

#include <omp.h>

#include <algorithm>
#include <vector>
#ifdef __AVX512F__
#include <immintrin.h>
#endif

namespace qkv::kernels::cpu {
namespace {

constexpr int kBlockRows = 8;  // rows of a per pass: a's rows stay in L1
constexpr int kCols = 3;       // rows of b per pass: 8 x 3 accumulators, each x load feeds 3 FMAs
// Passes per parallel task, about: long enough to stream b's rows in order.
constexpr int64_t kPassesPerTask = 22;
// b is prefetched (into L2) this many passes ahead: the hardware prefetcher alone leaves the
// loop waiting on memory for a third of its time at eight rows and more at one.
constexpr int64_t kPrefetchPasses = 2;

#ifdef __AVX512F__
// out[r][j] = a_r . b_j for R rows of a and kCols rows of b over K, sixteen k at a time: each b
// row is loaded once per pass and multiplied into all R rows, each a row once and into all
// kCols. b_j + ahead is prefetched as b_j is read.
template <int R>
void block(const float* a, int64_t lda, const float* const* b, int64_t K, int64_t ahead, float out[kBlockRows][kCols]) {
  __m512 acc[R][kCols];
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < kCols; ++j) acc[r][j] = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 16 <= K; k += 16) {
    __m512 w[kCols];
    for (int j = 0; j < kCols; ++j) {
      w[j] = _mm512_loadu_ps(b[j] + k);
      _mm_prefetch(reinterpret_cast<const char*>(b[j] + k + ahead), _MM_HINT_T1);
    }
    for (int r = 0; r < R; ++r) {
      __m512 x = _mm512_loadu_ps(a + r * lda + k);
      // Keep x in a register: the compilers otherwise fold its load into each of the kCols FMAs,
      // 27 loads per 24 FMAs at eight rows instead of 11, and the loop runs at 60% of the FMA rate.
      asm("" : "+v"(x));
      for (int j = 0; j < kCols; ++j) acc[r][j] = _mm512_fmadd_ps(x, w[j], acc[r][j]);
    }
  }
  if (k < K) {  // the last K % 16, masked
    const __mmask16 m = __mmask16((1u << (K - k)) - 1);
    __m512 w[kCols];
    for (int j = 0; j < kCols; ++j) w[j] = _mm512_maskz_loadu_ps(m, b[j] + k);
    for (int r = 0; r < R; ++r) {
      const __m512 x = _mm512_maskz_loadu_ps(m, a + r * lda + k);
      for (int j = 0; j < kCols; ++j) acc[r][j] = _mm512_fmadd_ps(x, w[j], acc[r][j]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < kCols; ++j) out[r][j] = _mm512_reduce_add_ps(acc[r][j]);
}

void rows_times_cols(const float* a, int64_t lda, int rows, const float* const* b, int64_t K, int64_t ahead,
                     float out[kBlockRows][kCols]) {
  switch (rows) {
    case 1: return block<1>(a, lda, b, K, ahead, out);
    case 2: return block<2>(a, lda, b, K, ahead, out);
    case 3: return block<3>(a, lda, b, K, ahead, out);
    case 4: return block<4>(a, lda, b, K, ahead, out);
    case 5: return block<5>(a, lda, b, K, ahead, out);
    case 6: return block<6>(a, lda, b, K, ahead, out);
    case 7: return block<7>(a, lda, b, K, ahead, out);
    default: return block<8>(a, lda, b, K, ahead, out);
  }
}
#else
void rows_times_cols(const float* a, int64_t lda, int rows, const float* const* b, int64_t K, int64_t /*ahead*/,
                     float out[kBlockRows][kCols]) {
  for (int r = 0; r < rows; ++r) {
    const float* __restrict x = a + r * lda;
    for (int j = 0; j < kCols; ++j) {
      const float* __restrict w = b[j];
      float sum = 0;
#pragma omp simd reduction(+ : sum)
      for (int64_t k = 0; k < K; ++k) sum += x[k] * w[k];
      out[r][j] = sum;
    }
  }
}
#endif

}  // namespace

void skinny_gemm_nt(const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t M, int64_t N, int64_t K,
                    const float* bias) {
  // Tasks are a multiple of the thread count and split the passes evenly, so that with a static
  // schedule every thread streams the same share of b (35 tasks of 66 columns for N = 2304 left
  // one thread 3% more of a compute-bound product, and the other waiting).
  const int64_t passes = (N + kCols - 1) / kCols, threads = omp_get_max_threads();
  const int64_t tasks =
      threads * std::max<int64_t>(1, (passes + threads * kPassesPerTask / 2) / (threads * kPassesPerTask));
  const int64_t ahead = kPrefetchPasses * kCols * ldb;  // the same k, that many passes on
  // Rows of a a multiple of 2 KB apart (a GPT's 3072-wide projection back) fall into the same L1
  // sets as each other and as b's rows, and evict each other on every pass (twice the time at
  // eight rows): such an a is read from a copy whose rows are 64 bytes further apart. The copy's
  // buffer is kept per thread, so a decode step allocates nothing here.
  const float* rows_of_a = a;
  int64_t ld = lda;
  if (lda % 512 == 0) {
    thread_local std::vector<float> padded;
    ld = lda + 16;
    padded.resize(size_t(M * ld));
    for (int64_t r = 0; r < M; ++r) std::copy(a + r * lda, a + r * lda + K, padded.data() + r * ld);
    rows_of_a = padded.data();
  }
#pragma omp parallel for schedule(static) if (tasks > 1 && M * N * K >= (1 << 18))
  for (int64_t t = 0; t < tasks; ++t) {
    const int64_t n1 = std::min(N, (t + 1) * passes / tasks * kCols);
    for (int64_t n = t * passes / tasks * kCols; n < n1; n += kCols) {
      const float* cols[kCols];
      for (int j = 0; j < kCols; ++j) cols[j] = b + std::min(n + j, n1 - 1) * ldb;  // short: repeat the last
      for (int64_t r0 = 0; r0 < M; r0 += kBlockRows) {
        const int rows = int(std::min<int64_t>(kBlockRows, M - r0));
        float out[kBlockRows][kCols];
        rows_times_cols(rows_of_a + r0 * ld, ld, rows, cols, K, ahead, out);
        for (int r = 0; r < rows; ++r)
          for (int64_t j = 0; j < kCols && n + j < n1; ++j)
            c[(r0 + r) * N + n + j] = out[r][j] + (bias ? bias[n + j] : 0.0f);
      }
    }
  }
}

}  // namespace qkv::kernels::cpu
