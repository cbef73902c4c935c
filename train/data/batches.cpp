#include "train/data/batches.h"

#include <algorithm>

#include "autograd/ops.h"
#include "train/data/shuffle.h"

namespace qkv::data {
TensorBatches::TensorBatches(LabelledData data, int64_t batch_size, bool shuffle, uint64_t seed, Shard shard)
    : data_(std::move(data)), batch_size_(batch_size), shuffle_(shuffle), seed_(seed), shard_(shard) {
  check<ValueError>(batch_size >= 1, "batches: batch size must be positive, got ", batch_size);
}

int64_t TensorBatches::batches_per_epoch() const { return (data_.size() + batch_size_ - 1) / batch_size_; }

void TensorBatches::start_epoch(int64_t epoch) {
  cursor_ = 0;
  if (!shuffle_) return;
  order_ = from_vector(epoch_order(data_.size(), seed_, epoch), {data_.size()}, data_.inputs.device());
}

bool TensorBatches::next(Tensor& inputs, Tensor& targets) {
  if (cursor_ >= data_.size()) return false;
  const int64_t e = std::min(data_.size(), cursor_ + batch_size_);
  const auto [first, end] = shard_rows(e - cursor_, shard_);
  if (shuffle_) {
    const Tensor idx = order_.slice(0, cursor_ + first, cursor_ + end);
    inputs = index_select(data_.inputs, 0, idx);
    targets = index_select(data_.targets, 0, idx);
  } else {
    inputs = data_.inputs.slice(0, cursor_ + first, cursor_ + end);
    targets = data_.targets.slice(0, cursor_ + first, cursor_ + end);
  }
  cursor_ = e;
  return true;
}

}  // namespace qkv::data
