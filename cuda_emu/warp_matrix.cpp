#include "cuda_emu/warp_matrix.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstring>

#include "cuda_emu/block.h"
#include "cuda_emu/error.h"
#include "cuda_emu/shared_memory.h"

namespace qkv::cuda_emu {
namespace {

// ---- ldmatrix ------------------------------------------------------------------------------------

struct LdmatrixSlot {
  const uint16_t* row;
  uint32_t* out;
  bool trans;
};

void check_row_address(const uint16_t* row, int lane) {
  const std::string what = str("ldmatrix: lane ", lane, "'s row address");
  require<SharedMemoryError>(shared_address(row, 16, what.c_str()) % 16 == 0, what, " is not 16-byte aligned");
}

void ldmatrix_model(void* const* slots, uint32_t, const void*) {
  const auto* s = reinterpret_cast<const LdmatrixSlot* const*>(slots);
  for (int lane = 0; lane < kLanes; ++lane) check_row_address(s[lane]->row, lane);
  for (int lane = 0; lane < kLanes; ++lane) {
    const bool trans = s[lane]->trans;
    for (int m = 0; m < 4; ++m) {
      uint16_t lo, hi;
      if (!trans) {  // row lane / 4, columns 2 (lane % 4) and + 1
        const uint16_t* r = s[8 * m + lane / 4]->row;
        lo = r[2 * (lane % 4)];
        hi = r[2 * (lane % 4) + 1];
      } else {  // column lane / 4 of rows 2 (lane % 4) and + 1
        lo = s[8 * m + 2 * (lane % 4)]->row[lane / 4];
        hi = s[8 * m + 2 * (lane % 4) + 1]->row[lane / 4];
      }
      s[lane]->out[m] = uint32_t(lo) | uint32_t(hi) << 16;
    }
  }
}

// ---- mma -----------------------------------------------------------------------------------------

struct MmaSlot {
  float* c;
  const uint32_t* a;
  uint32_t b[2];
  bool bf16;
};

double widen(uint16_t bits, bool is_bf16) {
  return is_bf16 ? double(__bfloat162float(__ushort_as_bfloat16(bits))) : double(__half2float(__ushort_as_half(bits)));
}

// Half h (0: low, 1: high) of a 32-bit register.
uint16_t half_of(uint32_t r, int h) { return uint16_t(h == 0 ? r & 0xffffu : r >> 16); }

void mma_model(void* const* slots, uint32_t, const void*) {
  const auto* s = reinterpret_cast<const MmaSlot* const*>(slots);
  const bool is_bf16 = s[0]->bf16;
  double A[16][16], B[16][8], C[16][8];
  for (int lane = 0; lane < kLanes; ++lane) {
    const int g = lane / 4, t = lane % 4;
    for (int i = 0; i < 8; ++i) {  // a_i: register i / 2, half i % 2
      const int row = (i == 2 || i == 3 || i == 6 || i == 7) ? g + 8 : g;
      const int col = 2 * t + (i & 1) + (i >= 4 ? 8 : 0);
      A[row][col] = widen(half_of(s[lane]->a[i / 2], i % 2), is_bf16);
    }
    for (int i = 0; i < 4; ++i) {  // b_i: register i / 2, half i % 2
      const int row = 2 * t + (i & 1) + (i >= 2 ? 8 : 0);
      B[row][g] = widen(half_of(s[lane]->b[i / 2], i % 2), is_bf16);
    }
    for (int i = 0; i < 4; ++i) C[i < 2 ? g : g + 8][2 * t + (i & 1)] = s[lane]->c[i];
  }
  for (int lane = 0; lane < kLanes; ++lane) {
    const int g = lane / 4, t = lane % 4;
    for (int i = 0; i < 4; ++i) {
      const int row = i < 2 ? g : g + 8, col = 2 * t + (i & 1);
      double d = C[row][col];
      for (int k = 0; k < 16; ++k) d += A[row][k] * B[k][col];
      s[lane]->c[i] = float(d);
    }
  }
}

}  // namespace

void ldmatrix_x4(uint32_t (&r)[4], const uint16_t* row, bool trans) {
  LdmatrixSlot slot{row, r, trans};
  warp_converge(trans ? "ldmatrix.x4.trans" : "ldmatrix.x4", kFullMask, &slot, ldmatrix_model);
}

void mma_m16n8k16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1, bool bf16) {
  MmaSlot slot{c, a, {b0, b1}, bf16};
  warp_converge(bf16 ? "mma.m16n8k16.bf16" : "mma.m16n8k16.f16", kFullMask, &slot, mma_model);
}

}  // namespace qkv::cuda_emu
