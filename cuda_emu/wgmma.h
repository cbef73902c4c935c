// wgmma, the warpgroup-level matrix product of sm_90a, modelled from the PTX ISA's text
// ("Asynchronous Warpgroup Level Matrix Multiply-Accumulate Instructions"):
//
//   wgmma.mma_async.sync.aligned.m64nNk16.f32.{bf16,f16}.{bf16,f16}
//       D (64 x N, float) = A (64 x 16) B (16 x N) + (scale-d ? D : 0)
//   A from shared memory (a matrix descriptor) or from registers, B from shared memory. The
//   warpgroup's 128 threads each hold N / 2 of D: thread t = 32 w + 4 g + q (warp w, lane 4 g +
//   q) holds d[i] at row 16 w + g + 8 ((i / 2) % 2), column 8 (i / 4) + 2 q + i % 2; A in
//   registers is 4 registers of two 16-bit values each, register r holding row 16 w + g + 8 (r %
//   2), columns 2 q + 8 (r / 2) and + 1 (the lower in the low half). Products are exact and
//   summed in double with D, rounded once to float.
//
//   Matrix descriptors (64 bits): start address >> 4 in bits 0-13, leading dimension byte
//   offset (LBO) >> 4 in 16-29, stride dimension byte offset (SBO) >> 4 in 32-45, base offset in
//   49-51, swizzle mode in 62-63 (0 none, 1 128B, 2 64B, 3 32B). An operand is K-major (its K
//   elements contiguous: imm-trans 0) or MN-major (imm-trans 1), made of 16-byte units (8
//   elements) in the ISA's canonical layouts, for an element at MN index m and K index k (e =
//   element within its unit, S the swizzle span in bytes, W = S / 16):
//     K-major,  no swizzle:  (m % 8) * 16 + (m / 8) * SBO + (k / 8) * LBO + (k % 8) * 2
//     K-major,  swizzled:    (m % 8) * S  + (m / 8) * SBO + (k / 8) * 16  + (k % 8) * 2
//     MN-major, no swizzle:  (m % 8) * 2 + (m / 8) * SBO + (k % 8) * 16 + (k / 8) * LBO
//     MN-major, swizzled:    (m % 8) * 2 + (m / 8 % W) * 16 + (m / 8 / W) * LBO + (k % 8) * S
//                            + (k / 8) * SBO
//   added to the start address, then swizzled as the bulk copy swizzles (cuda_emu/tensor_copy.h).
//   Not modelled, and refused: a non-zero base offset, and a swizzled operand whose start address
//   is not on a row of its swizzle pattern (its bits 7 and up within the pattern must be zero).
//
// Asynchrony: mma_async reads its operands and writes D when the product completes, which is at
// a point the schedule chooses after its group was committed (wgmma.commit_group): a thread at
// wgmma.wait_group waits for it as for any asynchronous work (cuda_emu/block.h) while the other
// warps run on, so a stage released before the wait may be refilled before the product reads it.
// Until then the threads' D registers hold NaN, so code that reads them before waiting reads NaN,
// and a store to D or to A's registers in between is lost or caught. What the model refuses
// (AsyncError): mma_async with no wgmma.fence since the warpgroup last waited (after a wait its
// threads use the registers; the ISA asks for a fence between any such use and a product
// touching them, which the model checks only across waits), a thread that changed its A
// registers before the product completed, a warpgroup that exits with products issued but not
// committed or not waited for.
//
// Each instruction is a warpgroup collective (cuda_emu/block.h): all 128 threads must call it.
#pragma once
#include <cstdint>

namespace qkv::cuda_emu {

struct MatrixDescriptor {
  uint32_t start, lbo, sbo;  // bytes
  int base_offset;
  int swizzle;  // as the bulk copy's: 0 none, 1 32B, 2 64B, 3 128B
};
MatrixDescriptor decode_matrix_descriptor(uint64_t desc);
// The shared address of 16-bit element (mn, k) of the operand `d` describes, before the swizzle.
uint32_t operand_address(const MatrixDescriptor& d, bool mn_major, int mn, int k);

void wgmma_fence();
void wgmma_commit_group();
void wgmma_wait_group(int in_flight);
// d: the calling thread's n / 2 accumulators; desc_a null: A is a_regs (4 registers).
void wgmma_mma_async(float* d, int n, const uint64_t* desc_a, const uint32_t* a_regs, uint64_t desc_b, bool scale_d,
                     bool trans_a, bool trans_b, bool bf16);

}  // namespace qkv::cuda_emu
