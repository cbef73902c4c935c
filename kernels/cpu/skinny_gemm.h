// c [M, N] = a [M, K] b [N, K]^T (+ bias [N]) for a few rows M (at most kSkinnyMaxRows): a decode
// step's linear layers and output layer, where the whole cost is streaming b (the weight) from
// memory once. Each thread takes a run of b's rows and computes their dot products with every
// row of a (which stays in L1), three of b's rows and up to eight of a's at a time; a GEMM library
// would pack or reorder b first, reading it more than once. b is prefetched ahead of the loop.
#pragma once
#include <cstdint>

namespace qkv::kernels::cpu {

inline constexpr int64_t kSkinnyMaxRows = 16;

// Rows of a and b are contiguous (unit inner stride), lda and ldb apart; c is contiguous.
void skinny_gemm_nt(const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t M, int64_t N, int64_t K,
                    const float* bias = nullptr);

}  // namespace qkv::kernels::cpu
