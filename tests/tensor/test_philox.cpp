#include <doctest/doctest.h>

#include <cmath>

#include "autograd/autograd.h"
#include "kernels/cpu/philox_batch.h"
#include "tensor/philox.h"

using namespace qkv;

// Known-answer vectors of Philox4x32-10 from the Random123 distribution (kat_vectors).
TEST_CASE("philox 4x32-10 matches the Random123 known answers") {
  struct Kat {
    philox::U32x4 ctr;
    uint32_t k0, k1;
    philox::U32x4 want;
  };
  const Kat kats[] = {
      {{{0, 0, 0, 0}}, 0, 0, {{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}}},
      {{{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}},
       0xffffffff,
       0xffffffff,
       {{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}}},
      {{{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}},
       0xa4093822,
       0x299f31d0,
       {{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}}},
  };
  for (const Kat& k : kats) {
    philox::U32x4 got = philox::philox4x32_10(k.ctr, k.k0, k.k1);
    for (int i = 0; i < 4; ++i) CHECK(got.v[i] == k.want.v[i]);
  }
}

TEST_CASE("a stream resumes from its saved counter") {
  Generator g(2024);
  Tensor first = rand({10}, {}, &g);
  const GeneratorState saved = g.state();
  Tensor a = randn({7}, {}, &g);
  Tensor b = rand({5}, DType::f64, &g);
  g.set_state(saved);
  CHECK(randn({7}, {}, &g).to_vector<float>() == a.to_vector<float>());
  CHECK(rand({5}, DType::f64, &g).to_vector<double>() == b.to_vector<double>());
  CHECK(first.to_vector<float>() != rand({10}, {}, &g).to_vector<float>());
}

TEST_CASE("element i of a draw depends only on seed, offset and i") {
  Generator g1(5), g2(5);
  std::vector<float> long_draw = rand({9}, {}, &g1).to_vector<float>();
  std::vector<float> short_draw = rand({6}, {}, &g2).to_vector<float>();
  for (size_t i = 0; i < short_draw.size(); ++i) CHECK(long_draw[i] == short_draw[i]);
  Generator g3(6);
  CHECK(rand({6}, {}, &g3).to_vector<float>() != short_draw);
}

TEST_CASE("uniform, normal and bernoulli have the right moments") {
  Generator g(1);
  const int64_t n = 200000;
  Tensor u = uniform({n}, -1, 3, DType::f64, &g);
  CHECK(mean(u).item<double>() == doctest::Approx(1.0).epsilon(0.01));
  CHECK(amax(u).item<double>() < 3.0);
  CHECK(-amax(-u).item<double>() >= -1.0);
  Tensor z = normal({n}, 2, 0.5, DType::f64, &g);
  const double m = mean(z).item<double>();
  CHECK(m == doctest::Approx(2.0).epsilon(0.005));
  CHECK(std::sqrt(mean(pow(z - m, 2)).item<double>()) == doctest::Approx(0.5).epsilon(0.01));
  Tensor b = bernoulli({n}, 0.25, DType::f32, &g);
  CHECK(mean(b).item<float>() == doctest::Approx(0.25).epsilon(0.02));
}

TEST_CASE("the CPU kernels' 16-block Philox batches equal philox::block, across the counter's 32-bit carry") {
  // kernels/cpu/philox_batch.h computes 16 consecutive blocks at once (AVX-512 where built for it)
  // and interleaves their words; the random kernels rely on it being the per-element stream.
  for (const uint64_t seed : {uint64_t(0), uint64_t(12345), uint64_t(0xFFFFFFFFFFFF)})
    for (const uint64_t first : {uint64_t(0), uint64_t(7), uint64_t(0xFFFFFFF8), uint64_t(0x1FFFFFFFC)}) {
      CAPTURE(seed);
      CAPTURE(first);
      uint32_t words[4 * kernels::cpu::kPhiloxBatch];
      kernels::cpu::philox_batch(seed, first, words);
      int mismatches = 0;
      for (int j = 0; j < kernels::cpu::kPhiloxBatch; ++j) {
        const auto block = philox::block(seed, first + uint64_t(j));
        for (int w = 0; w < 4; ++w) mismatches += words[j * 4 + w] != block.v[size_t(w)];
      }
      CHECK(mismatches == 0);
    }
}
