#include "kernels/cpu/skinny_gemm.h"

#include <algorithm>
#ifdef __AVX512F__
#include <immintrin.h>
#endif

namespace qkv::kernels::cpu {
namespace {

// Output columns per parallel task: a multiple of 2, long enough to stream b's rows in order.
constexpr int64_t kColumnsPerTask = 64;
constexpr int kBlockRows = 8;  // rows of a per pass: 2 x 8 accumulators, a's rows stay in L1

#ifdef __AVX512F__
// out[r][j] = a_r . b_j for R rows of a and two rows of b, sixteen k at a time: each b row is
// loaded once per pass and multiplied into all R rows.
template <int R>
void block(const float* a, int64_t lda, const float* b0, const float* b1, int64_t K, float out[kBlockRows][2]) {
  __m512 acc0[R], acc1[R];
  for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 16 <= K; k += 16) {
    const __m512 w0 = _mm512_loadu_ps(b0 + k), w1 = _mm512_loadu_ps(b1 + k);
    for (int r = 0; r < R; ++r) {
      const __m512 x = _mm512_loadu_ps(a + r * lda + k);
      acc0[r] = _mm512_fmadd_ps(x, w0, acc0[r]);
      acc1[r] = _mm512_fmadd_ps(x, w1, acc1[r]);
    }
  }
  if (k < K) {  // the last K % 16, masked
    const __mmask16 m = __mmask16((1u << (K - k)) - 1);
    const __m512 w0 = _mm512_maskz_loadu_ps(m, b0 + k), w1 = _mm512_maskz_loadu_ps(m, b1 + k);
    for (int r = 0; r < R; ++r) {
      const __m512 x = _mm512_maskz_loadu_ps(m, a + r * lda + k);
      acc0[r] = _mm512_fmadd_ps(x, w0, acc0[r]);
      acc1[r] = _mm512_fmadd_ps(x, w1, acc1[r]);
    }
  }
  for (int r = 0; r < R; ++r) {
    out[r][0] = _mm512_reduce_add_ps(acc0[r]);
    out[r][1] = _mm512_reduce_add_ps(acc1[r]);
  }
}

void rows_times_two(const float* a, int64_t lda, int rows, const float* b0, const float* b1, int64_t K,
                    float out[kBlockRows][2]) {
  switch (rows) {
    case 1: return block<1>(a, lda, b0, b1, K, out);
    case 2: return block<2>(a, lda, b0, b1, K, out);
    case 3: return block<3>(a, lda, b0, b1, K, out);
    case 4: return block<4>(a, lda, b0, b1, K, out);
    case 5: return block<5>(a, lda, b0, b1, K, out);
    case 6: return block<6>(a, lda, b0, b1, K, out);
    case 7: return block<7>(a, lda, b0, b1, K, out);
    default: return block<8>(a, lda, b0, b1, K, out);
  }
}
#else
void rows_times_two(const float* a, int64_t lda, int rows, const float* b0, const float* b1, int64_t K,
                    float out[kBlockRows][2]) {
  for (int r = 0; r < rows; ++r) {
    const float* __restrict x = a + r * lda;
    float s0 = 0, s1 = 0;
#pragma omp simd reduction(+ : s0, s1)
    for (int64_t k = 0; k < K; ++k) {
      s0 += x[k] * b0[k];
      s1 += x[k] * b1[k];
    }
    out[r][0] = s0;
    out[r][1] = s1;
  }
}
#endif

}  // namespace

void skinny_gemm_nt(const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t M, int64_t N, int64_t K,
                    const float* bias) {
  const int64_t tasks = (N + kColumnsPerTask - 1) / kColumnsPerTask;
#pragma omp parallel for schedule(static) if (tasks > 1 && M * N * K >= (1 << 18))
  for (int64_t t = 0; t < tasks; ++t) {
    const int64_t n1 = std::min(N, (t + 1) * kColumnsPerTask);
    for (int64_t n = t * kColumnsPerTask; n < n1; n += 2) {
      const int64_t n_second = std::min(n + 1, n1 - 1);  // an odd last column pairs with itself
      for (int64_t r0 = 0; r0 < M; r0 += kBlockRows) {
        const int rows = int(std::min<int64_t>(kBlockRows, M - r0));
        float out[kBlockRows][2];
        rows_times_two(a + r0 * lda, lda, rows, b + n * ldb, b + n_second * ldb, K, out);
        for (int r = 0; r < rows; ++r)
          for (int64_t j = 0; j < 2 && n + j < n1; ++j)
            c[(r0 + r) * N + n + j] = out[r][j] + (bias ? bias[n + j] : 0.0f);
      }
    }
  }
}

}  // namespace qkv::kernels::cpu
