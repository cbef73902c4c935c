// The CPU attention's decode path (kernels/cpu/decode_attention.cpp: few query rows per KV head,
// a KV head's query heads in one block, keys split across threads and the splits' softmaxes
// merged) against attention written out in float64: GQA and MQA groups, K=V as one tensor,
// bottom-right causal masking with rows that see no key, and caches long enough to be split.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"

using namespace qkv;

namespace {

struct DecodeCase {
  std::string name;
  int64_t B, H, Hk, T, S, D;
  bool causal, kv_shared;
  double q_scale = 1;  // larger: peaked scores, whose running max moves from block to block
};

// out[b, h, t] = softmax(q k^T / sqrt(D) masked) v, in float64; a row that sees no key is 0.
std::vector<double> reference(const DecodeCase& c, const std::vector<double>& q, const std::vector<double>& k,
                              const std::vector<double>& v) {
  std::vector<double> out(size_t(c.B * c.H * c.T * c.D), 0.0);
  const int64_t group = c.H / c.Hk;
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t h = 0; h < c.H; ++h)
      for (int64_t t = 0; t < c.T; ++t) {
        const int64_t visible = c.causal ? std::clamp<int64_t>(t + 1 + c.S - c.T, 0, c.S) : c.S;
        if (visible == 0) continue;
        const double* qr = q.data() + ((b * c.H + h) * c.T + t) * c.D;
        const int64_t kv = (b * c.Hk + h / group) * c.S;
        std::vector<double> s(static_cast<size_t>(visible), 0.0);
        double m = -std::numeric_limits<double>::infinity(), l = 0;
        for (int64_t j = 0; j < visible; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < c.D; ++d) dot += qr[d] * k[size_t((kv + j) * c.D + d)];
          s[size_t(j)] = dot / std::sqrt(double(c.D));
          m = std::max(m, s[size_t(j)]);
        }
        for (double& x : s) l += (x = std::exp(x - m));
        double* o = out.data() + ((b * c.H + h) * c.T + t) * c.D;
        for (int64_t j = 0; j < visible; ++j)
          for (int64_t d = 0; d < c.D; ++d) o[d] += s[size_t(j)] / l * v[size_t((kv + j) * c.D + d)];
      }
  return out;
}

}  // namespace

TEST_CASE("cpu decode attention: every group, K=V and causal row equals attention in float64") {
  NoGradGuard no_grad;
  const std::vector<DecodeCase> cases = {
      {"one query per head, QKV, batch 2", 2, 4, 4, 1, 300, 16, true, false},
      {"MQA over a cache split across threads", 1, 4, 1, 1, 700, 32, true, false},
      {"GQA-3, three new rows, causal", 2, 6, 2, 3, 530, 16, true, false},
      {"K=V as one tensor, split", 1, 2, 2, 2, 1100, 64, true, true},
      {"not causal", 1, 3, 3, 4, 90, 8, false, false},
      {"more rows than keys: the first see none", 1, 2, 1, 4, 2, 8, true, false},
      {"more rows than keys at a fixed width", 1, 2, 1, 4, 2, 16, true, false},
      {"K=V, peaked scores over blocks of 16 keys and a short last block", 2, 4, 4, 1, 1001, 64, true, true, 6},
      {"GQA-4 at width 64, two new rows", 1, 8, 2, 2, 77, 64, true, false, 3},
  };
  Generator gen(21);
  for (const DecodeCase& c : cases) {
    CAPTURE(c.name);
    const Tensor q = normal({c.B, c.H, c.T, c.D}, 0, c.q_scale, {}, &gen), k = randn({c.B, c.Hk, c.S, c.D}, {}, &gen);
    const Tensor v = c.kv_shared ? k : randn({c.B, c.Hk, c.S, c.D}, {}, &gen);
    const std::vector<double> want = reference(c, q.to_vector<double>(), k.to_vector<double>(), v.to_vector<double>());
    const std::vector<double> got = attention(q, k, v, Tensor(), c.causal).to_vector<double>();
    REQUIRE(got.size() == want.size());
    double worst = 0;
    for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - want[i]));
    CHECK(worst < 2e-5);
  }
}

TEST_CASE("cpu decode attention: a row that sees no key is zero, as in the tiled kernel") {
  NoGradGuard no_grad;
  Generator gen(22);
  // 4 new rows over 2 keys, bottom-right causal: rows 0 and 1 see nothing.
  const Tensor q = randn({1, 2, 4, 8}, {}, &gen), k = randn({1, 2, 2, 8}, {}, &gen);
  const std::vector<double> out = attention(q, k, k, Tensor(), true).to_vector<double>();
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t t = 0; t < 2; ++t)
      for (int64_t d = 0; d < 8; ++d) CHECK(out[size_t((h * 4 + t) * 8 + d)] == 0.0);
}
