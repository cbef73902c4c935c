// The warp-wide matrix instructions of the flash attention kernels, for an emulated build
// (QKV_CUDA_EMU), modelled from the PTX ISA's text and not from the kernels' fragment helpers
// (kernels/cuda/attention/flash_fragments.cuh), which they check:
//   ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16: lanes 8m .. 8m + 7 give the addresses of
//     the 8 rows (16 bytes each) of matrix m; lane l receives in register m the two elements of
//     matrix m at row l / 4, columns 2 (l % 4) and 2 (l % 4) + 1, the lower column in the low
//     half; with .trans, rows 2 (l % 4) and 2 (l % 4) + 1 of column l / 4. Every address must be
//     16-byte aligned and lie in the block's shared window (cuda_emu/shared_memory.h), else a
//     SharedMemoryError.
//   mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.{bf16,f16}.f32: D = A B + C with A 16 x 16,
//     B 16 x 8 (k x n), C and D 16 x 8 float; with g = l / 4 and t = l % 4, lane l holds A's
//     elements a_i at row g (i in 0, 1, 4, 5) or g + 8 (2, 3, 6, 7), column 2t + (i & 1), plus 8
//     for i >= 4, two per register (a0 a1 | a2 a3 | a4 a5 | a6 a7); B's b_i at row 2t + (i & 1),
//     plus 8 for i >= 2, column g (b0 b1 | b2 b3); C's and D's c_i at row g (i < 2) or g + 8,
//     column 2t + (i & 1). Products are exact and summed in double, rounded once to float.
// Each is a warp collective (cuda_emu/block.h): every lane of the warp must call it.
#pragma once
#include <cstdint>

namespace qkv::cuda_emu {

void ldmatrix_x4(uint32_t (&r)[4], const uint16_t* row, bool trans);
void mma_m16n8k16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1, bool bf16);

}  // namespace qkv::cuda_emu
