// The image datasets of an experiment config: where each lives under data.root, the train /
// validation / test splits (validation held out of the training set), and the limits of the
// CPU-sized scales.
#pragma once
#include <memory>

#include "train/data/image_dataset.h"
#include "lab/experiment/config.h"

namespace qkv::tasks {

struct VisionSplits {
  std::shared_ptr<data::ImageDataset> train, val, test;
};

// The folder of data.dataset under data.root (its standard name; Fashion-MNIST also from
// Debian's dataset-fashion-mnist package). IOError listing the places looked at.
std::string dataset_folder(const experiment::DataConfig& d);
std::shared_ptr<data::ImageDataset> load_dataset(const experiment::DataConfig& d, data::Split split);
VisionSplits load_vision_splits(const experiment::DataConfig& d, uint64_t seed);

}  // namespace qkv::tasks
