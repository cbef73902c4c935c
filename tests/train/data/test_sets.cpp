// Sets for set anomaly detection (train/data/sets.h): every set holds set_size - 1 examples of
// one class and one of another at the target position; ResampledSets draws new sets every epoch,
// the same ones again for the same seed and epoch, and shards each batch's rows over ranks.
#include <doctest/doctest.h>

#include <map>

#include "autograd/ops.h"
#include "train/data/sets.h"

using namespace qkv;
using namespace qkv::data;

namespace {

// 40 examples of 4 classes; feature 0 is the example's index, feature 1 its class.
LabelledFeatures labelled() {
  std::vector<float> f;
  std::vector<int64_t> labels;
  for (int64_t i = 0; i < 40; ++i) {
    f.push_back(float(i));
    f.push_back(float(i % 4));
    labels.push_back(i % 4);
  }
  return {from_vector(f, {40, 2}), from_vector(labels, {40})};
}

std::vector<int64_t> every_index(int64_t n) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(i);
  return v;
}

// Checks every set of [S, n, 2] features against its target; returns the example indices drawn.
std::vector<float> check_sets(const Tensor& features, const Tensor& targets) {
  const int64_t S = features.size(0), n = features.size(1);
  const std::vector<float> f = features.to_vector<float>();
  const std::vector<int64_t> t = targets.to_vector<int64_t>();
  std::vector<float> drawn;
  for (int64_t s = 0; s < S; ++s) {
    std::map<float, int> classes;
    for (int64_t j = 0; j < n; ++j) {
      ++classes[f[size_t((s * n + j) * 2 + 1)]];
      drawn.push_back(f[size_t((s * n + j) * 2)]);
    }
    std::string dump;
    for (int64_t j = 0; j < n; ++j) dump += cat(f[size_t((s * n + j) * 2)], ":", f[size_t((s * n + j) * 2 + 1)], " ");
    INFO("set ", s, ": ", dump);
    REQUIRE(classes.size() == 2);
    const float odd = f[size_t((s * n + t[size_t(s)]) * 2 + 1)];
    CHECK(classes[odd] == 1);
  }
  return drawn;
}

}  // namespace

TEST_CASE("sets: n - 1 of one class and the odd one at the target position") {
  Generator gen(5);
  const SetData sets = make_sets(labelled(), every_index(40), 50, 5, gen);
  CHECK(sets.features.shape() == Shape{50, 5, 2});
  check_sets(sets.features, sets.targets);
}

TEST_CASE("resampled sets: new sets every epoch, the same for the same seed, each batch split over ranks") {
  ResampledSets a(labelled(), every_index(40), 10, 4, 4, 9, kCPU), b(labelled(), every_index(40), 10, 4, 4, 9, kCPU);
  CHECK(a.batches_per_epoch() == 3);
  CHECK(a.examples() == 10);
  auto epoch_of = [](ResampledSets& r, int64_t epoch) {
    r.start_epoch(epoch);
    std::vector<float> drawn;
    Tensor x, y;
    int64_t rows = 0;
    while (r.next(x, y)) {
      const std::vector<float> d = check_sets(x, y);
      drawn.insert(drawn.end(), d.begin(), d.end());
      rows += x.size(0);
    }
    CHECK(rows == 10);
    return drawn;
  };
  const std::vector<float> first = epoch_of(a, 0), second = epoch_of(a, 1);
  CHECK(first != second);
  CHECK(epoch_of(b, 1) == second);  // keyed by (seed, epoch): a resumed or another rank's draw
  CHECK(epoch_of(a, 0) == first);

  // Two ranks serve the two halves of each batch of the same sets.
  ResampledSets r0(labelled(), every_index(40), 10, 4, 4, 9, kCPU, {0, 2}),
      r1(labelled(), every_index(40), 10, 4, 4, 9, kCPU, {1, 2});
  r0.start_epoch(1);
  r1.start_epoch(1);
  std::vector<float> both;
  Tensor x0, y0, x1, y1;
  while (r0.next(x0, y0)) {
    REQUIRE(r1.next(x1, y1));
    for (const Tensor& x : {x0, x1}) {
      const std::vector<float> v = x.to_vector<float>();
      for (size_t i = 0; i < v.size(); i += 2) both.push_back(v[i]);
    }
  }
  CHECK(both == second);

  ResampledSets unstarted(labelled(), every_index(40), 10, 4, 4, 9, kCPU);
  Tensor x, y;
  CHECK_THROWS_AS(unstarted.next(x, y), ValueError);
}
