// The anomaly family (paper Table 2, "Anomaly"): sets of n images, n-1 from one class and one
// from another at a random position; a permutation-equivariant set transformer of the run's
// variant scores each element and is trained to pick the odd one out. Elements are features of
// a frozen encoder: a ResNet34 (torchvision weights from a safetensors file, or random init) on
// the images resized to data.image_size, computed once per dataset split and cached under
// `cache_dir`, or features read from a file.
#pragma once
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "lab/experiment/run_dir.h"
#include "nn/models/resnet.h"
#include "train/data/image/image_dataset.h"
#include "train/data/sets.h"
#include "train/dist/communicator.h"

namespace qkv::tasks {

// Pooled features [N, 512] and labels of every image of `data`: each image resized bilinearly
// (data/image/image_resize.h, PIL's) to image_size x image_size (0: as it is), grayscale repeated to
// RGB, ImageNet-normalized, then `net.features` without a graph, `batch` images at a time (0:
// as many as hold the pixels of 64 images of 224 x 224, at most 256). Progress and the time per
// image go to stdout.
data::LabelledFeatures resnet_features(const nn::BasicResNet& net, const data::ImageDataset& data, int64_t image_size,
                                       const Device& device, int64_t batch = 0);

// A 64-bit digest of a file's bytes, as 16 hex digits: tells weight files apart in cache names
// even when they share a name. IOError naming the file when it cannot be read.
std::string file_digest(const std::string& path);

// The cache file of one split's ResNet34 features:
// "<dataset>-<split>-resnet34-<size>px-<weights>.safetensors", size "native" for 0, weights
// "random" or "<stem>-<digest>".
std::string feature_cache_name(const std::string& dataset, const std::string& split, int64_t image_size,
                               const std::string& weights_path, const std::string& weights_digest);

// Features from `cache` when it exists (its tensors checked: IOError naming the file otherwise),
// `metadata` then replaced by the file's; else from `compute`, which may add to `metadata`, then
// written to `cache` atomically with it (unless `write` is false: data-parallel ranks other than
// 0 compute without writing). A line saying which is printed and appended to `log`.
data::LabelledFeatures cached_features(const std::filesystem::path& cache,
                                       const std::function<data::LabelledFeatures()>& compute,
                                       std::map<std::string, std::string>& metadata, std::vector<std::string>& log,
                                       bool write = true);

// An anomaly config's data as its runs draw it: the features (from data.features_file or the
// ResNet34 cache in `cache_dir`, computed and written there when missing and `write_cache`),
// standardised when data.standardize, and the sets: training (none when data.resample: drawn
// per epoch from train_pool), validation (none when the last epoch is tested) and test.
struct AnomalySets {
  data::LabelledFeatures train_features;
  std::vector<int64_t> train_pool;  // the training images the training sets are drawn from
  data::SetData train, val, test;
  int64_t pixels = 0;              // side of the images the ResNet34 encoded; 0: features from a file
  std::vector<std::string> notes;  // where the features came from
};
AnomalySets anomaly_sets(const experiment::AnomalyConfig& c, const std::filesystem::path& cache_dir,
                         const Device& device, bool write_cache = true);

experiment::ResultRow run_anomaly(const experiment::Run& run, const experiment::RunDir& dir,
                                  const std::filesystem::path& cache_dir, dist::Communicator* comm = nullptr);

}  // namespace qkv::tasks
