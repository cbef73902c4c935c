// The tensor-core fragments of the bf16/f16 flash attention kernels (private to kernels/cuda):
// mma.sync m16n8k16 with float32 accumulation, ldmatrix loads of A and B fragments from padded
// row-major shared tiles, and the accumulators turned back into an A fragment. Plain device code
// but for the two instructions, which an emulated build (QKV_CUDA_EMU) takes from the emulator's
// model of the PTX ISA's text (cuda_emu/warp_matrix.h): tests/kernels/test_flash_fragments.cpp
// runs these helpers through whole products on the CPU that way.
//
// Fragment layouts of mma.m16n8k16 (PTX ISA, "Matrix Fragments for mma.m16n8k16"), lane =
// threadIdx.x % 32, g = lane / 4 (0..7), t = lane % 4 (0..3); each 32-bit register holds two
// consecutive 16-bit elements, the lower column (or k) in the low half:
//   A (16 x 16, row-major, rows m, cols k): a0 = A[g][2t, 2t+1], a1 = A[g+8][2t, 2t+1],
//                                           a2 = A[g][2t+8, 2t+9], a3 = A[g+8][2t+8, 2t+9]
//   B (16 x 8, k x n):                      b0 = B[2t, 2t+1][g],  b1 = B[2t+8, 2t+9][g]
//   C (16 x 8, float):                      c0, c1 = C[g][2t, 2t+1], c2, c3 = C[g+8][2t, 2t+1]
// So the accumulators of two neighbouring n-blocks (columns 16 kc .. 16 kc + 15 of a product)
// are, rounded to 16 bits, exactly the A fragment of a product that takes those columns as its
// k dimension (acc_to_a): P = softmax(S) feeds P V without leaving registers.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>

namespace qkv::kernels::cuda::flash {

template <bool kBF16> struct Half16;
template <> struct Half16<true> {
  static __device__ __forceinline__ float to_float(uint16_t x) { return __bfloat162float(__ushort_as_bfloat16(x)); }
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    uint32_t bits;
    memcpy(&bits, &h, sizeof bits);  // a register move, without punning the pair's type
    return bits;
  }
};
template <> struct Half16<false> {
  static __device__ __forceinline__ float to_float(uint16_t x) { return __half2float(__ushort_as_half(x)); }
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    const __half2 h = __floats2half2_rn(lo, hi);
    uint32_t bits;
    memcpy(&bits, &h, sizeof bits);
    return bits;
  }
};

// c += a b for one 16x8x16 tile: a row-major 16x16 (4 registers), b column-major 16x8 (2).
template <bool kBF16>
__device__ __forceinline__ void mma_16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#ifdef QKV_CUDA_EMU
  ::qkv::cuda_emu::mma_m16n8k16(c, a, b0, b1, kBF16);
#else
  if constexpr (kBF16)
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

// Four 8x8 b16 matrices; lanes 8m..8m+7 give the row addresses of matrix m, and register m
// receives it (transposed with Trans). Without Trans, lane holds row g, columns 2t and 2t+1 of
// each matrix; with Trans, rows 2t and 2t+1 of column g.
template <bool Trans> __device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const uint16_t* row) {
#ifdef QKV_CUDA_EMU
  ::qkv::cuda_emu::ldmatrix_x4(r, row, Trans);
#else
  const uint32_t addr = uint32_t(__cvta_generic_to_shared(row));
  if constexpr (Trans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
#endif
}

// ---- fragment loads from a row-major shared tile with row stride ld (elements) -------------

// The A fragment of rows r0 .. r0+15 and columns (k) k0 .. k0+15 of `tile`: matrix m (lanes
// 8m..8m+7) is rows r0 + 8 (m % 2) + (lane % 8), columns k0 + 8 (m / 2), which makes registers
// 0..3 exactly a0..a3 above.
__device__ __forceinline__ void load_a(uint32_t (&a)[4], const uint16_t* tile, int ld, int r0, int k0, int lane) {
  ldmatrix_x4<false>(a, tile + (r0 + lane % 16) * ld + k0 + (lane / 16) * 8);
}

// B fragments of two n-blocks from a tile stored n-major (tile[n][k], B = tile^T: K in Q K^T):
// n0 .. n0+7 in b[0], b[1] and n0+8 .. n0+15 in b[2], b[3], over k0 .. k0+15. Matrix m covers
// rows (n) n0 + 8 (m / 2) + (lane % 8), columns (k) k0 + 8 (m % 2); untransposed, the lane gets
// tile[n0 + g][k0 + 2t, 2t+1] = B[2t, 2t+1][g], i.e. b0 (then b1 for m odd).
__device__ __forceinline__ void load_b_nk(uint32_t (&b)[4], const uint16_t* tile, int ld, int n0, int k0, int lane) {
  const int m = lane / 8;
  ldmatrix_x4<false>(b, tile + (n0 + (m / 2) * 8 + lane % 8) * ld + k0 + (m % 2) * 8);
}

// B fragments of two n-blocks from a tile stored k-major (tile[k][n], B = tile: V in P V):
// same register order as load_b_nk. Matrix m covers rows (k) k0 + 8 (m % 2) + (lane % 8),
// columns (n) n0 + 8 (m / 2); transposed, the lane gets tile[k0 + 2t, 2t+1][n0 + g] = b0.
__device__ __forceinline__ void load_b_kn(uint32_t (&b)[4], const uint16_t* tile, int ld, int k0, int n0, int lane) {
  const int m = lane / 8;
  ldmatrix_x4<true>(b, tile + (k0 + (m % 2) * 8 + lane % 8) * ld + n0 + (m / 2) * 8);
}

// acc (16 rows by N columns: N / 8 accumulator n-blocks) += a (16 x 16) times columns k0 .. k0 +
// 15 of a tile stored n-major (tile[n][k], at least N rows): Q K^T with K's rows as the tile.
template <bool kBF16, int N>
__device__ __forceinline__ void mma_times_nk(float (&acc)[N / 8][4], const uint32_t (&a)[4], const uint16_t* tile,
                                             int ld, int k0, int lane) {
#pragma unroll
  for (int n2 = 0; n2 < N / 16; ++n2) {  // columns 16 n2 .. +15
    uint32_t b[4];
    load_b_nk(b, tile, ld, n2 * 16, k0, lane);
    mma_16816<kBF16>(acc[2 * n2], a, b[0], b[1]);
    mma_16816<kBF16>(acc[2 * n2 + 1], a, b[2], b[3]);
  }
}

// acc (16 rows by N columns: N / 8 accumulator n-blocks) += a (16 x 16) times rows k0 .. k0 + 15
// of a tile stored k-major (tile[k][n], at least N columns).
template <bool kBF16, int N>
__device__ __forceinline__ void mma_times_kn(float (&acc)[N / 8][4], const uint32_t (&a)[4], const uint16_t* tile,
                                             int ld, int k0, int lane) {
#pragma unroll
  for (int n2 = 0; n2 < N / 16; ++n2) {  // columns 16 n2 .. +15
    uint32_t b[4];
    load_b_kn(b, tile, ld, k0, n2 * 16, lane);
    mma_16816<kBF16>(acc[2 * n2], a, b[0], b[1]);
    mma_16816<kBF16>(acc[2 * n2 + 1], a, b[2], b[3]);
  }
}

// The A fragment (k = the 16 columns of two n-blocks) from the float accumulators of n-blocks
// lo (columns 16 kc .. +7) and hi (16 kc + 8 .. +15), rounded to the input dtype.
template <bool kBF16>
__device__ __forceinline__ void acc_to_a(uint32_t (&a)[4], const float (&lo)[4], const float (&hi)[4]) {
  using H16 = Half16<kBF16>;
  a[0] = H16::pack(lo[0], lo[1]);  // row g,     k 2t, 2t+1
  a[1] = H16::pack(lo[2], lo[3]);  // row g + 8, k 2t, 2t+1
  a[2] = H16::pack(hi[0], hi[1]);  // row g,     k 2t+8, 2t+9
  a[3] = H16::pack(hi[2], hi[3]);  // row g + 8, k 2t+8, 2t+9
}

}  // namespace qkv::kernels::cuda::flash
