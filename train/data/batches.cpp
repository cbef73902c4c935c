#include "train/data/batches.h"

#include <algorithm>

#include "autograd/ops.h"

namespace qkv::data {
namespace {

// A uniform random permutation of [0, n): the argsort of n uniform keys drawn from `gen`.
Tensor random_permutation(int64_t n, Generator& gen, const Device& device) {
  const std::vector<float> keys = rand({n}, DType::f32, &gen).to_vector<float>();
  std::vector<int64_t> perm(keys.size());
  for (size_t i = 0; i < perm.size(); ++i) perm[i] = int64_t(i);
  std::stable_sort(perm.begin(), perm.end(), [&](int64_t a, int64_t b) { return keys[size_t(a)] < keys[size_t(b)]; });
  return from_vector(perm, {n}, device);
}

}  // namespace

TensorBatches::TensorBatches(LabelledData data, int64_t batch_size, bool shuffle, uint64_t seed)
    : data_(std::move(data)), batch_size_(batch_size), shuffle_(shuffle), seed_(seed) {
  check<ValueError>(batch_size >= 1, "batches: batch size must be positive, got ", batch_size);
}

int64_t TensorBatches::batches_per_epoch() const { return (data_.size() + batch_size_ - 1) / batch_size_; }

void TensorBatches::start_epoch(int64_t epoch) {
  cursor_ = 0;
  if (!shuffle_) return;
  Generator gen(seed_);
  gen.set_state({seed_, uint64_t(epoch) << 40});   // epoch e draws from its own stretch of the stream
  order_ = random_permutation(data_.size(), gen, data_.inputs.device());
}

bool TensorBatches::next(Tensor& inputs, Tensor& targets) {
  if (cursor_ >= data_.size()) return false;
  const int64_t e = std::min(data_.size(), cursor_ + batch_size_);
  if (shuffle_) {
    const Tensor idx = order_.slice(0, cursor_, e);
    inputs = index_select(data_.inputs, 0, idx);
    targets = index_select(data_.targets, 0, idx);
  } else {
    inputs = data_.inputs.slice(0, cursor_, e);
    targets = data_.targets.slice(0, cursor_, e);
  }
  cursor_ = e;
  return true;
}

}  // namespace qkv::data
