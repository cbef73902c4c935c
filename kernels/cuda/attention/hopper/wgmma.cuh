// wgmma for the Hopper attention kernels (private to kernels/cuda/attention/hopper): shared-memory
// matrix descriptors for tiles the bulk copy lays out under the 128B swizzle, and
//   wgmma.mma_async.sync.aligned.m64nNk16.f32.{bf16,f16}.{bf16,f16}, N = 64 or 128,
// with A and B from shared memory, B K-major (mma_ss: S = Q K^T, dP = dO V^T and their
// transposes), or A from registers and B N-major (mma_rs: O += P V, dV += P^T dO, dK += dS^T Q,
// dQ += dS K), plus fence, commit and wait. Under nvcc each is its PTX instruction; in an
// emulated build the emulator's model (cuda_emu/wgmma.h) with the same operands.
//
// Tiles. A [rows][64] block of 16-bit elements copied under CU_TENSOR_MAP_SWIZZLE_128B occupies
// rows of 128 bytes, 8-row atoms of 1024 bytes; a tile of D columns is D / 64 such blocks one
// after another. As K-major operand (K = the columns) a k-step of 16 columns starts 32 bytes
// further along the row, or in the next block (SBO 1024: the next 8 rows); as N-major operand
// (N = the columns, K = the rows) a k-step of 16 rows starts 2048 bytes on, and columns 64 ..
// 127 are the next block (LBO: the block's size).
//
// Accumulators: thread t of the warpgroup (warp w = t / 32, g = t % 32 / 4, q = t % 4) holds
// d[i] at row 16 w + g + 8 (i / 2 % 2), column 8 (i / 4) + 2 q + i % 2 (the ISA's D layout); its A
// registers for a 16-column k-step kc of such accumulators are to_a(d, kc) (the ISA's A layout).
// The compiler cannot see that a product writes its accumulators later than the instruction
// issues: fence_operands() pins their reads and writes between the issue and the wait.
#pragma once
#include <cstdint>

#include "kernels/cuda/attention/flash_fragments.cuh"
#include "kernels/cuda/attention/hopper/sm90.cuh"

namespace qkv::kernels::cuda::sm90 {

// The descriptor of a 128B-swizzled operand starting at `p`: SBO 1024, LBO `lbo` bytes.
__device__ __forceinline__ uint64_t descriptor(const void* p, uint32_t lbo) {
  return uint64_t((smem_address(p) & 0x3ffff) >> 4) | uint64_t(lbo >> 4) << 16 | uint64_t(1024 >> 4) << 32 |
         uint64_t(1) << 62;
}

__device__ __forceinline__ void wgmma_fence() {
#ifdef QKV_CUDA_EMU
  ::qkv::cuda_emu::wgmma_fence();
#elif defined(QKV_HOPPER_DEVICE)
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#endif
}

__device__ __forceinline__ void wgmma_commit() {
#ifdef QKV_CUDA_EMU
  ::qkv::cuda_emu::wgmma_commit_group();
#elif defined(QKV_HOPPER_DEVICE)
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
#endif
}

// Waits until at most kPending committed groups are still in flight.
template <int kPending> __device__ __forceinline__ void wgmma_wait() {
#ifdef QKV_CUDA_EMU
  ::qkv::cuda_emu::wgmma_wait_group(kPending);
#elif defined(QKV_HOPPER_DEVICE)
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(kPending) : "memory");
#endif
}

template <int N> __device__ __forceinline__ void fence_operands(float (&d)[N]) {
#if defined(QKV_HOPPER_DEVICE) && !defined(QKV_CUDA_EMU)
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
#endif
}
template <int N> __device__ __forceinline__ void fence_operands(uint32_t (&r)[N][4]) {
#if defined(QKV_HOPPER_DEVICE) && !defined(QKV_CUDA_EMU)
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int k = 0; k < 4; ++k) asm volatile("" : "+r"(r[i][k])::"memory");
#endif
}

// The A registers of k-step kc (columns 16 kc .. 16 kc + 15) of accumulators d, rounded.
template <bool kBF16, int N> __device__ __forceinline__ void to_a(uint32_t (&a)[4], const float (&d)[N], int kc) {
  using H16 = flash::Half16<kBF16>;
  a[0] = H16::pack(d[8 * kc + 0], d[8 * kc + 1]);  // row g,     columns 2q, 2q + 1
  a[1] = H16::pack(d[8 * kc + 2], d[8 * kc + 3]);  // row g + 8
  a[2] = H16::pack(d[8 * kc + 4], d[8 * kc + 5]);  // row g,     columns 2q + 8, 2q + 9
  a[3] = H16::pack(d[8 * kc + 6], d[8 * kc + 7]);  // row g + 8
}

#ifndef QKV_CUDA_EMU
// Operand lists of the inline PTX: "%0, %1, ..." and "+f"(d[0]), ...
#define QKV_OPS8(a, b, c, d, e, f, g, h) "%" #a ", %" #b ", %" #c ", %" #d ", %" #e ", %" #f ", %" #g ", %" #h
#define QKV_D32                                                                         \
  QKV_OPS8(0, 1, 2, 3, 4, 5, 6, 7)                                                      \
  ", " QKV_OPS8(8, 9, 10, 11, 12, 13, 14, 15) ", " QKV_OPS8(16, 17, 18, 19, 20, 21, 22, \
                                                            23) ", " QKV_OPS8(24, 25, 26, 27, 28, 29, 30, 31)
#define QKV_D64                                                                                                      \
  QKV_D32 ", " QKV_OPS8(32, 33, 34, 35, 36, 37, 38, 39) ", " QKV_OPS8(40, 41, 42, 43, 44, 45, 46, 47) ", " QKV_OPS8( \
      48, 49, 50, 51, 52, 53, 54, 55) ", " QKV_OPS8(56, 57, 58, 59, 60, 61, 62, 63)
#define QKV_F8(i)                                                                                             \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), \
      "+f"(d[i + 7])
#define QKV_F32 QKV_F8(0), QKV_F8(8), QKV_F8(16), QKV_F8(24)
#define QKV_F64 QKV_F32, QKV_F8(32), QKV_F8(40), QKV_F8(48), QKV_F8(56)
#endif

// d (64 x N) = A B + (accumulate ? d : 0), A and B K-major in shared memory.
template <int N, bool kBF16>
__device__ __forceinline__ void mma_ss(float (&d)[N / 2], uint64_t a, uint64_t b, bool accumulate) {
  static_assert(N == 64 || N == 128, "wgmma N of 64 or 128");
#ifdef QKV_CUDA_EMU
  ::qkv::cuda_emu::wgmma_mma_async(d, N, &a, nullptr, b, accumulate, false, false, kBF16);
#elif defined(QKV_HOPPER_DEVICE)
  const int scale = accumulate ? 1 : 0;
  if constexpr (N == 64 && kBF16)
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\nwgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {" QKV_D32
        "}, %32, %33, p, 1, 1, 0, 0;\n}\n"
        : QKV_F32
        : "l"(a), "l"(b), "r"(scale));
  else if constexpr (N == 64)
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\nwgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {" QKV_D32
        "}, %32, %33, p, 1, 1, 0, 0;\n}\n"
        : QKV_F32
        : "l"(a), "l"(b), "r"(scale));
  else if constexpr (kBF16)
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\nwgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {" QKV_D64
        "}, %64, %65, p, 1, 1, 0, 0;\n}\n"
        : QKV_F64
        : "l"(a), "l"(b), "r"(scale));
  else
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\nwgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {" QKV_D64
        "}, %64, %65, p, 1, 1, 0, 0;\n}\n"
        : QKV_F64
        : "l"(a), "l"(b), "r"(scale));
#endif
}

// d (64 x N) = A B + (accumulate ? d : 0), A from registers, B N-major in shared memory.
template <int N, bool kBF16>
__device__ __forceinline__ void mma_rs(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t b, bool accumulate) {
  static_assert(N == 64 || N == 128, "wgmma N of 64 or 128");
#ifdef QKV_CUDA_EMU
  ::qkv::cuda_emu::wgmma_mma_async(d, N, nullptr, a, b, accumulate, false, true, kBF16);
#elif defined(QKV_HOPPER_DEVICE)
  const int scale = accumulate ? 1 : 0;
  if constexpr (N == 64 && kBF16)
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\nwgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {" QKV_D32
        "}, {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
        : QKV_F32
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(scale));
  else if constexpr (N == 64)
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\nwgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {" QKV_D32
        "}, {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
        : QKV_F32
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(scale));
  else if constexpr (kBF16)
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\nwgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {" QKV_D64
        "}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
        : QKV_F64
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(scale));
  else
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\nwgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {" QKV_D64
        "}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
        : QKV_F64
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(scale));
#endif
}

// ---- tile-level products ----------------------------------------------------------------------

// d (64 x N) = A B^T over K = kK columns: A = 64 rows of a [rows][kK] tile at `a` (K-major), B =
// N rows of a [rows][kK] tile at `b` (K-major), both tiles kRowsA / kRowsB rows tall (the 64-column
// blocks' stride). Issues kK / 16 products; the caller fences before and commits after.
template <int N, int kK, int kRowsA, int kRowsB, bool kBF16>
__device__ __forceinline__ void tile_ss(float (&d)[N / 2], const unsigned char* a, const unsigned char* b) {
#pragma unroll
  for (int ks = 0; ks < kK / 16; ++ks) {
    const int block = ks / 4, within = ks % 4;  // 64-column block, 16-column step inside it
    mma_ss<N, kBF16>(d, descriptor(a + block * kRowsA * 128 + within * 32, 0),
                     descriptor(b + block * kRowsB * 128 + within * 32, 0), ks > 0);
  }
}

// d (64 x N) (+)= P B over K = kK rows of B: P from registers p[kK / 16][4], B = the first kK rows
// of a [rows][N] tile at `b` (N-major), kRowsB rows tall. The caller fences and commits.
template <int N, int kK, int kRowsB, bool kBF16>
__device__ __forceinline__ void tile_rs(float (&d)[N / 2], const uint32_t (&p)[kK / 16][4], const unsigned char* b,
                                        bool accumulate) {
#pragma unroll
  for (int ks = 0; ks < kK / 16; ++ks)
    mma_rs<N, kBF16>(d, p[ks], descriptor(b + ks * 2048, uint32_t(kRowsB * 128)), accumulate || ks > 0);
}

}  // namespace qkv::kernels::cuda::sm90
