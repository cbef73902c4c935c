// Row-wise kernels (softmax, layer_norm, cross_entropy) work on a contiguous [rows, n] view
// with the reduced dim last. RowView arranges that, and writes results back into outputs whose
// reduced dim is elsewhere.
#pragma once
#include <vector>

#include "tensor/view.h"

namespace qkv::kernels::cpu {

struct RowView {
  Tensor x;            // contiguous, `dim` moved last
  int64_t rows = 0, n = 0;
  std::vector<int64_t> perm;   // permutation applied (identity when dim was last)
  bool moved = false;

  RowView(const Tensor& t, int64_t dim) {
    const int64_t nd = t.dim();
    for (int64_t d = 0; d < nd; ++d)
      if (d != dim) perm.push_back(d);
    if (nd > 0) perm.push_back(dim);
    moved = nd > 0 && dim != nd - 1;
    x = raw::contiguous(moved ? raw::permute(t, perm) : t);
    n = nd == 0 ? 1 : x.shape().back();
    rows = n == 0 ? 0 : x.numel() / n;
  }
  // A contiguous buffer laid out like x, for a result destined to an output of t's shape.
  Tensor result_buffer(const Tensor& out) const { return moved ? empty(x.shape(), {out.dtype(), out.device()}) : out; }
  // Copies a buffer from result_buffer into out (a no-op when it is out).
  void write_back(const Tensor& buffer, const Tensor& out) const {
    if (!moved) return;
    std::vector<int64_t> inv(perm.size());
    for (size_t i = 0; i < perm.size(); ++i) inv[size_t(perm[i])] = int64_t(i);
    raw::copy(out, raw::permute(buffer, inv));
  }
};

}  // namespace qkv::kernels::cpu
