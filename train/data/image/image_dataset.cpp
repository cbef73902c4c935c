// The format-independent datasets of train/data/image/image_dataset.h: MemoryImageDataset (pixels and
// labels in tensors), SubsetDataset (an index view) and split_holdout. The
// file formats live in idx.cpp, cifar.cpp and tinyimagenet.cpp.
#include "train/data/image/image_dataset.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "train/data/shuffle.h"

namespace qkv::data {

namespace {

void check_index(const std::string& name, int64_t i, int64_t n) {
  check<IndexError>(i >= 0 && i < n, name, ": example ", i, " out of range for ", n, " examples");
}

void check_memory_inputs(const std::string& name, const Tensor& images, const Tensor& labels, int64_t classes) {
  check<ShapeError>(images.defined() && images.dim() == 4, name, ": images must be [N, H, W, C], got ",
                    images.defined() ? images.dim() : 0, " dims");
  check<DTypeError>(images.dtype() == DType::u8, name, ": images must be uint8, got ", dtype_name(images.dtype()));
  check<ShapeError>(labels.defined() && labels.dim() == 1 && labels.size(0) == images.size(0), name,
                    ": labels must be [N] with N = ", images.size(0), " images");
  check<DTypeError>(labels.dtype() == DType::i64, name, ": labels must be int64, got ", dtype_name(labels.dtype()));
  check<DeviceError>(!images.is_cuda() && !labels.is_cuda(), name, ": images and labels must be on the CPU");
  check<ValueError>(classes >= 1, name, ": classes must be positive, got ", classes);
}

}  // namespace

MemoryImageDataset::MemoryImageDataset(std::string name, Tensor images, Tensor labels, int64_t classes)
    : name_(std::move(name)), classes_(classes) {
  check_memory_inputs(name_, images, labels, classes);
  images_ = images.contiguous();
  labels_ = labels.contiguous();
  label_ptr_ = labels_.data<int64_t>();
  for (int64_t i = 0; i < labels_.size(0); ++i)
    check<ValueError>(label_ptr_[i] >= 0 && label_ptr_[i] < classes_, name_, ": label ", label_ptr_[i], " of example ",
                      i, " outside [0, ", classes_, ")");
}

int64_t MemoryImageDataset::label(int64_t i) const {
  check_index(name_, i, size());
  return label_ptr_[i];
}

void MemoryImageDataset::read(int64_t i, uint8_t* pixels) const {
  check_index(name_, i, size());
  const int64_t bytes = height() * width() * channels();
  std::memcpy(pixels, images_.data<uint8_t>() + i * bytes, size_t(bytes));
}

SubsetDataset::SubsetDataset(std::shared_ptr<const ImageDataset> base, std::vector<int64_t> indices, std::string name)
    : base_(std::move(base)), indices_(std::move(indices)), name_(std::move(name)) {
  check<ValueError>(base_ != nullptr, name_, ": no base dataset");
  for (int64_t i : indices_) check_index(base_->name(), i, base_->size());
}

int64_t SubsetDataset::label(int64_t i) const {
  check_index(name_, i, size());
  return base_->label(indices_[size_t(i)]);
}

void SubsetDataset::read(int64_t i, uint8_t* pixels) const {
  check_index(name_, i, size());
  base_->read(indices_[size_t(i)], pixels);
}

std::pair<std::shared_ptr<ImageDataset>, std::shared_ptr<ImageDataset>> split_holdout(
    std::shared_ptr<const ImageDataset> data, int64_t holdout, uint64_t seed) {
  check<ValueError>(data != nullptr, "split_holdout: no dataset");
  check<ValueError>(holdout >= 0 && holdout <= data->size(), "split_holdout: holdout ", holdout, " must lie in [0, ",
                    data->size(), "] for ", data->name());
  const std::vector<int64_t> order = philox_permutation(data->size(), seed);
  std::vector<int64_t> val(order.begin(), order.begin() + holdout), train(order.begin() + holdout, order.end());
  std::sort(val.begin(), val.end());  // ascending: keeps file-backed reads local
  std::sort(train.begin(), train.end());
  const std::string name = data->name();
  return {std::make_shared<SubsetDataset>(data, std::move(train), name + ":train"),
          std::make_shared<SubsetDataset>(data, std::move(val), name + ":val")};
}

}  // namespace qkv::data
