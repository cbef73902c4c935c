// Fixed sinusoidal position encodings: the 1D table added to encoder inputs, and the
// [n, n, m] table P of the 2D positional scores of the (+) attention variants.
#pragma once
#include "tensor/tensor.h"

namespace qkv::nn {

// [positions, dim]: channel c of position p is sin(p w_k) for even c = 2k and cos(p w_k) for
// odd c = 2k+1, with w_k = 10000^(-2k/dim) (Vaswani et al.; an odd dim ends with a sine).
Tensor sinusoidal_table(int64_t positions, int64_t dim);

// [n, n, m]: P[i, j] = concat(sinusoid(i, m/2), sinusoid(j, m/2)), so P[i, j] != P[j, i]
// (PAPER.md, "The 2D positional encoding of the (+) variants"). m must be even.
Tensor pos2d_table(int64_t n, int64_t m);

}  // namespace qkv::nn
