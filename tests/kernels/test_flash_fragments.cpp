// The flash attention kernels' tensor-core fragment helpers (kernels/cuda/attention/flash_fragments.cuh),
// compiled for the emulated device (cmake/cuda.cmake: qkv_emulated_sources) and run as one
// emulated warp whose ldmatrix and mma follow the PTX ISA's text: the forward's two products over
// a 16 x 64 query tile and 64 x 64 key and value tiles, S = Q K^T (load_a, mma_times_nk) and
// O = P V with P the rounded scores taken straight from the accumulators (acc_to_a,
// mma_times_kn), against the same products in double. A helper that addresses the wrong row,
// column or register of a fragment fails here without a GPU.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/cuda/attention/flash_fragments.cuh"

using namespace qkv;
namespace flash = qkv::kernels::cuda::flash;

namespace {

constexpr int kRows = 16, kDim = 64, kKeys = 64;
constexpr int kLd = kDim + 8;  // the kernels' padded row stride (flash_mma.cuh: kPad)

template <bool kBF16> uint16_t round16(float x) {
  return kBF16 ? __bfloat16_as_ushort(__float2bfloat16_rn(x)) : __half_as_ushort(__float2half_rn(x));
}
template <bool kBF16> double widen16(uint16_t bits) {
  return kBF16 ? __bfloat162float(__ushort_as_bfloat16(bits)) : __half2float(__ushort_as_half(bits));
}

// Lane `lane`'s accumulators of N / 8 n-blocks into the row-major [16][N] matrix they hold: c_i
// at row g (i < 2) or g + 8, column 8 n + 2t + (i & 1) (the ISA's C layout).
template <int N> void scatter_accumulators(const float (&acc)[N / 8][4], int lane, float (*out)[N]) {
  const int g = lane / 4, t = lane % 4;
  for (int n = 0; n < N / 8; ++n)
    for (int i = 0; i < 4; ++i) out[i < 2 ? g : g + 8][8 * n + 2 * t + (i & 1)] = acc[n][i];
}

// max |got - want| / max |want| over a [kRows][N] product.
template <int N> double relative_error(const float (*got)[N], const std::vector<std::vector<double>>& want) {
  double diff = 0, scale = 0;
  for (int i = 0; i < kRows; ++i)
    for (int j = 0; j < N; ++j) {
      diff = std::max(diff, std::abs(double(got[i][j]) - want[size_t(i)][size_t(j)]));
      scale = std::max(scale, std::abs(want[size_t(i)][size_t(j)]));
    }
  return diff / scale;
}

template <bool kBF16> void check_forward_products() {
  alignas(16) static uint16_t smem[(kRows + 2 * kKeys) * kLd];
  uint16_t *Q = smem, *K = Q + kRows * kLd, *V = K + kKeys * kLd;
  std::mt19937 gen(kBF16 ? 1 : 2);
  std::normal_distribution<float> normal;
  std::fill(std::begin(smem), std::end(smem), uint16_t(0xffff));  // the padding is never read as data
  for (int r = 0; r < kRows; ++r)
    for (int d = 0; d < kDim; ++d) Q[r * kLd + d] = round16<kBF16>(normal(gen));
  for (int r = 0; r < kKeys; ++r)
    for (int d = 0; d < kDim; ++d) {
      K[r * kLd + d] = round16<kBF16>(normal(gen));
      V[r * kLd + d] = round16<kBF16>(normal(gen));
    }

  float S[kRows][kKeys], O[kRows][kDim];
  {
    const cuda_emu::SharedWindow shared(smem, sizeof smem);
    cuda_emu::run_warp([&](int lane) {
      float s[kKeys / 8][4] = {};
      for (int k0 = 0; k0 < kDim; k0 += 16) {
        uint32_t a[4];
        flash::load_a(a, Q, kLd, 0, k0, lane);
        flash::mma_times_nk<kBF16, kKeys>(s, a, K, kLd, k0, lane);
      }
      float o[kDim / 8][4] = {};
      for (int kc = 0; kc < kKeys / 16; ++kc) {
        uint32_t p[4];
        flash::acc_to_a<kBF16>(p, s[2 * kc], s[2 * kc + 1]);
        flash::mma_times_kn<kBF16, kDim>(o, p, V, kLd, 16 * kc, lane);
      }
      scatter_accumulators<kKeys>(s, lane, S);
      scatter_accumulators<kDim>(o, lane, O);
    });
  }

  std::vector<std::vector<double>> s_ref(kRows, std::vector<double>(kKeys)), o_ref(kRows, std::vector<double>(kDim));
  for (int i = 0; i < kRows; ++i) {
    for (int j = 0; j < kKeys; ++j)
      for (int d = 0; d < kDim; ++d)
        s_ref[size_t(i)][size_t(j)] += widen16<kBF16>(Q[i * kLd + d]) * widen16<kBF16>(K[j * kLd + d]);
    // P is the kernel's own scores rounded to 16 bits, so O checks the second product alone.
    for (int e = 0; e < kDim; ++e)
      for (int j = 0; j < kKeys; ++j)
        o_ref[size_t(i)][size_t(e)] += widen16<kBF16>(round16<kBF16>(S[i][j])) * widen16<kBF16>(V[j * kLd + e]);
  }
  // Each 16-deep step is summed exactly and rounded to float: a few float roundings in all.
  CHECK(relative_error(S, s_ref) < 1e-6);
  CHECK(relative_error(O, o_ref) < 1e-6);
}

}  // namespace

TEST_CASE("flash fragments: S = Q K^T and O = P V over 16 x 64 x 64 through the kernels' helpers (bf16, f16)") {
  check_forward_products<true>();
  check_forward_products<false>();
}
