// Image classification datasets in their standard formats. Every dataset is N examples of a
// fixed-size image (height x width x channels, uint8, row-major HWC) and an int64 label, read
// by index; in-memory formats (IDX, CIFAR binary) hold the pixels, file-per-image formats
// (TinyImageNet JPEGs) decode on read, so decoding happens on the loader's worker threads.
// Each loader takes the folder holding the dataset's files under their standard names and
// raises IOError naming the file and what is wrong (missing, truncated, bad magic, bad label).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace qkv::data {

class ImageDataset {
 public:
  virtual ~ImageDataset() = default;
  virtual std::string name() const = 0;  // "mnist/train", ...
  virtual int64_t size() const = 0;
  virtual int64_t height() const = 0;
  virtual int64_t width() const = 0;
  virtual int64_t channels() const = 0;  // 1 (grayscale) or 3 (RGB)
  virtual int64_t classes() const = 0;
  virtual int64_t label(int64_t i) const = 0;
  // Writes example i's height*width*channels bytes (HWC) to `pixels`. Safe to call from several
  // threads at once. Throws IndexError for i out of range, IOError for an undecodable file.
  virtual void read(int64_t i, uint8_t* pixels) const = 0;
};

// Pixels and labels held in memory.
class MemoryImageDataset : public ImageDataset {
 public:
  // images: [N, H, W, C] uint8; labels: [N] int64 in [0, classes).
  MemoryImageDataset(std::string name, Tensor images, Tensor labels, int64_t classes);
  std::string name() const override { return name_; }
  int64_t size() const override { return images_.size(0); }
  int64_t height() const override { return images_.size(1); }
  int64_t width() const override { return images_.size(2); }
  int64_t channels() const override { return images_.size(3); }
  int64_t classes() const override { return classes_; }
  int64_t label(int64_t i) const override;
  void read(int64_t i, uint8_t* pixels) const override;
  const Tensor& images() const { return images_; }
  const Tensor& labels() const { return labels_; }

 private:
  std::string name_;
  Tensor images_, labels_;
  int64_t classes_;
  const int64_t* label_ptr_;
};

// A view of some examples of another dataset (train / validation splits), by index.
class SubsetDataset : public ImageDataset {
 public:
  SubsetDataset(std::shared_ptr<const ImageDataset> base, std::vector<int64_t> indices, std::string name);
  std::string name() const override { return name_; }
  int64_t size() const override { return int64_t(indices_.size()); }
  int64_t height() const override { return base_->height(); }
  int64_t width() const override { return base_->width(); }
  int64_t channels() const override { return base_->channels(); }
  int64_t classes() const override { return base_->classes(); }
  int64_t label(int64_t i) const override;
  void read(int64_t i, uint8_t* pixels) const override;

 private:
  std::shared_ptr<const ImageDataset> base_;
  std::vector<int64_t> indices_;
  std::string name_;
};

// Splits off `holdout` examples (chosen by `seed`) as validation: {train, validation}.
std::pair<std::shared_ptr<ImageDataset>, std::shared_ptr<ImageDataset>> split_holdout(
    std::shared_ptr<const ImageDataset> data, int64_t holdout, uint64_t seed);

enum class Split { train, test };

// MNIST and Fashion-MNIST: {train,t10k}-{images-idx3,labels-idx1}-ubyte, plain or .gz, in `root`.
// Labels must lie in [0, classes).
std::shared_ptr<ImageDataset> load_idx_dataset(const std::string& root, Split split, const std::string& name,
                                               int64_t classes = 10);
// CIFAR-10 binary: data_batch_1..5.bin (whichever are present; the count is logged) and
// test_batch.bin in `root`; 3073-byte records (label, 3072 pixels CHW).
std::shared_ptr<ImageDataset> load_cifar10(const std::string& root, Split split);
// CIFAR-100 binary: train.bin / test.bin in `root`; 3074-byte records (coarse, fine, pixels).
std::shared_ptr<ImageDataset> load_cifar100(const std::string& root, Split split, bool coarse_labels = false);
// TinyImageNet layout in `root`: wnids.txt, train/<wnid>/images/*.JPEG, val/val_annotations.txt
// and val/images/*.JPEG; the val split serves as test. Grayscale JPEGs are promoted to RGB.
std::shared_ptr<ImageDataset> load_tinyimagenet(const std::string& root, Split split);

}  // namespace qkv::data
