#include "train/data/sets.h"

#include <algorithm>
#include <map>

#include "autograd/ops.h"
#include "train/data/shuffle.h"

namespace qkv::data {

SetData make_sets(const LabelledFeatures& data, const std::vector<int64_t>& pool, int64_t count, int64_t set_size,
                  Generator& gen) {
  const std::vector<int64_t> labels = data.labels.to_vector<int64_t>();
  std::map<int64_t, std::vector<int64_t>> by_class;
  for (int64_t i : pool) by_class[labels[size_t(i)]].push_back(i);
  std::vector<int64_t> majority_classes, all_classes;
  for (const auto& [c, members] : by_class) {
    all_classes.push_back(c);
    if (int64_t(members.size()) >= set_size - 1) majority_classes.push_back(c);
  }
  check<ValueError>(!majority_classes.empty() && all_classes.size() >= 2,
                    "anomaly sets: need two classes and one with ", set_size - 1, " examples; the pool has ",
                    pool.size(), " examples of ", all_classes.size(), " classes");
  // Every draw from one uniform stream, set_size + 3 a set: 2 class picks, set_size-1 member
  // picks, the odd member's pick and its position.
  const int64_t draws = count * (set_size + 3);
  const std::vector<double> u = rand({draws}, DType::f64, &gen).to_vector<double>();
  size_t k = 0;
  auto pick = [&](int64_t n) { return std::min<int64_t>(n - 1, int64_t(u.at(k++) * double(n))); };
  std::vector<int64_t> members(static_cast<size_t>(count * set_size)), odd(static_cast<size_t>(count));
  for (int64_t s = 0; s < count; ++s) {
    const int64_t a = majority_classes[size_t(pick(int64_t(majority_classes.size())))];
    std::vector<int64_t> others;
    for (int64_t c : all_classes)
      if (c != a) others.push_back(c);
    const int64_t b = others[size_t(pick(int64_t(others.size())))];
    // distinct majority members: a partial shuffle of that class's examples
    std::vector<int64_t> pool_a = by_class[a];
    for (int64_t j = 0; j < set_size - 1; ++j) {
      const int64_t r = j + pick(int64_t(pool_a.size()) - j);
      std::swap(pool_a[size_t(j)], pool_a[size_t(r)]);
    }
    const auto& pool_b = by_class[b];
    const int64_t odd_member = pool_b[size_t(pick(int64_t(pool_b.size())))];
    const int64_t position = pick(set_size);
    odd[size_t(s)] = position;
    for (int64_t j = 0, m = 0; j < set_size; ++j)
      members[size_t(s * set_size + j)] = j == position ? odd_member : pool_a[size_t(m++)];
  }
  Tensor idx = from_vector(members, {count * set_size});
  const int64_t F = data.features.size(1);
  return {index_select(data.features, 0, idx).reshape({count, set_size, F}), from_vector(odd, {count})};
}

ResampledSets::ResampledSets(LabelledFeatures data, std::vector<int64_t> pool, int64_t count, int64_t set_size,
                             int64_t batch_size, uint64_t seed, const Device& device, Shard shard)
    : data_(std::move(data)),
      pool_(std::move(pool)),
      count_(count),
      set_size_(set_size),
      batch_size_(batch_size),
      seed_(seed),
      device_(device),
      shard_(shard) {
  check<ValueError>(count >= 1 && batch_size >= 1, "resampled sets: count and batch_size must be positive, got ", count,
                    " and ", batch_size);
}

void ResampledSets::start_epoch(int64_t epoch) {
  Generator gen(mix64(seed_ ^ mix64(uint64_t(epoch) + 1)));
  SetData sets = make_sets(data_, pool_, count_, set_size_, gen);
  epoch_.emplace(LabelledData{sets.features.to(device_), sets.targets.to(device_)}, batch_size_, false, 0, shard_);
  epoch_->start_epoch(0);
}

bool ResampledSets::next(Tensor& inputs, Tensor& targets) {
  check<ValueError>(epoch_.has_value(), "resampled sets: next() before start_epoch()");
  return epoch_->next(inputs, targets);
}

}  // namespace qkv::data
