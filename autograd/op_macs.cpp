#include "autograd/op_macs.h"

#include <algorithm>

namespace qkv::autograd {

namespace {
int64_t product(const Shape& s, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= s[i];
  return p;
}
}  // namespace

int64_t op_macs(const OpShapes& call) {
  const std::vector<Shape>& in = call.inputs;
  switch (call.op) {
    case OpId::matmul: {  // [..., M, K] x [..., K, N] (either transposed), batch dims broadcast
      const Shape &a = in[0], &b = in[1];
      const auto* t = std::get_if<MatmulAttrs>(&call.attrs);
      const bool ta = t && t->trans_a, tb = t && t->trans_b;
      const int64_t M = a.size() >= 2 ? a[a.size() - (ta ? 1 : 2)] : 1,
                    K = ta && a.size() >= 2 ? a[a.size() - 2] : a.back();
      const int64_t N = b.size() >= 2 ? b[b.size() - (tb ? 2 : 1)] : 1;
      int64_t batch = 1;
      const size_t ba = a.size() >= 2 ? a.size() - 2 : 0, bb = b.size() >= 2 ? b.size() - 2 : 0;
      for (size_t i = 0; i < std::max(ba, bb); ++i) {
        const int64_t da = i < ba ? a[ba - 1 - i] : 1, db = i < bb ? b[bb - 1 - i] : 1;
        batch *= std::max(da, db);
      }
      return batch * M * N * K;
    }
    case OpId::linear: {  // x [..., in] through weight [out, in]
      const Shape &x = in[0], &w = in[1];
      return product(x, 0, x.size() - 1) * w[0] * w[1];
    }
    case OpId::attention:  // q [B, H, T, dh], k [B, Hk, S, dh], v [B, Hk, S, dv]
    case OpId::cache_attention: {
      const Shape &q = in[0], &k = in[1], &v = in[2];
      const int64_t S = k[k.size() - 2];
      return product(q, 0, q.size() - 1) * S * (q.back() + v.back());
    }
    default: return 0;
  }
}

int64_t MacCount::total() const {
  int64_t t = 0;
  for (const auto& [op, n] : by_op) t += n;
  return t;
}

MacCount count_macs(const std::function<void()>& work) {
  MacCount c;
  for (const OpShapes& call : trace_op_shapes(work))
    if (const int64_t n = op_macs(call); n > 0) c.by_op[op_info(call.op).name] += n;
  return c;
}

}  // namespace qkv::autograd
