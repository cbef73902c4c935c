// Set anomaly detection (paper Table 2, "Anomaly"): sets of n images, n-1 from one class and one
// from another at a random position; a permutation-equivariant set transformer scores each
// element and is trained to pick the odd one out. Elements are features of a frozen encoder: a
// ResNet34 (torchvision weights from a safetensors file, or random init), computed once per
// dataset split and cached, or features read from a file.
#pragma once
#include <filesystem>
#include <nlohmann/json.hpp>

#include "tensor/random.h"
#include "train/data/image_dataset.h"
#include "train/experiment/run_dir.h"
#include "train/experiment/sweep.h"

namespace qkv::train {

struct LabelledFeatures {
  Tensor features;   // [N, F] float32
  Tensor labels;     // [N] int64
};

// ResNet34 features of every image of `data` (ImageNet normalization; grayscale repeated to RGB),
// in batches, without a graph.
LabelledFeatures resnet_features(const ImageDataset& data, const std::string& weights, const Device& device);

struct SetData {
  Tensor features;   // [S, n, F]
  Tensor targets;    // [S] int64: the position of the odd element
};

// `count` sets of `set_size` drawn from the examples `pool` of `data`: a majority class with at
// least set_size-1 examples in the pool, another class, a random position for the odd one.
SetData make_sets(const LabelledFeatures& data, const std::vector<int64_t>& pool, int64_t count, int64_t set_size,
                  Generator& gen);

nlohmann::json run_anomaly(const experiment::Run& run, const experiment::RunDir& dir,
                           const std::filesystem::path& cache_dir);

}  // namespace qkv::train
