#include "lab/tasks/vision_data.h"

#include <filesystem>

namespace qkv::tasks {

namespace fs = std::filesystem;
using experiment::DatasetName;

namespace {

// Standard folder names, in the order they are tried under data.root.
std::vector<std::string> candidates(DatasetName d) {
  switch (d) {
    case DatasetName::mnist: return {"mnist", "MNIST/raw"};
    case DatasetName::fashion_mnist: return {"fashion-mnist", "FashionMNIST/raw"};
    case DatasetName::cifar10: return {"cifar-10-batches-bin"};
    case DatasetName::cifar100: return {"cifar-100-binary"};
    case DatasetName::tinyimagenet: return {"tiny-imagenet-200", "tiny-imagenet-200-sample"};
  }
  return {};
}

std::shared_ptr<data::ImageDataset> limit(std::shared_ptr<data::ImageDataset> data, int64_t n,
                                          const std::string& name) {
  if (n <= 0 || n >= data->size()) return data;
  std::vector<int64_t> first(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) first[size_t(i)] = i;
  return std::make_shared<data::SubsetDataset>(data, first, name);
}

}  // namespace

std::string dataset_folder(const experiment::ImageData& d) {
  std::vector<std::string> tried;
  for (const std::string& name : candidates(d.dataset)) {
    const fs::path p = fs::path(d.root) / name;
    if (fs::is_directory(p)) return p.string();
    tried.push_back(p.string());
  }
  if (d.dataset == DatasetName::fashion_mnist) {  // Debian's dataset-fashion-mnist package
    const std::string debian = "/usr/share/datasets/fashion-mnist";
    if (fs::is_directory(debian)) return debian;
    tried.push_back(debian);
  }
  std::string list;
  for (const auto& t : tried) list += (list.empty() ? "" : ", ") + t;
  throw IOError(cat("data.root '", d.root, "': no folder for dataset ", experiment::enum_name(d.dataset),
                    " (looked for ", list, "); set data.root=PATH to the folder holding it"));
}

std::shared_ptr<data::ImageDataset> load_dataset(const experiment::ImageData& d, data::Split split) {
  const std::string dir = dataset_folder(d);
  switch (d.dataset) {
    case DatasetName::mnist: return data::load_idx_dataset(dir, split, "mnist");
    case DatasetName::fashion_mnist: return data::load_idx_dataset(dir, split, "fashion-mnist");
    case DatasetName::cifar10: return data::load_cifar10(dir, split);
    case DatasetName::cifar100: return data::load_cifar100(dir, split);
    case DatasetName::tinyimagenet: return data::load_tinyimagenet(dir, split);
  }
  throw ValueError("unknown dataset");
}

VisionSplits load_vision_splits(const experiment::VisionConfig& c) {
  const experiment::VisionData& d = c.data;
  std::shared_ptr<data::ImageDataset> train = load_dataset(d, data::Split::train);
  std::shared_ptr<data::ImageDataset> test = load_dataset(d, data::Split::test);
  const bool hold_out = c.train.protocol == experiment::Protocol::holdout_best;
  const int64_t holdout = hold_out ? std::min<int64_t>(d.holdout, train->size() / 2) : 0;
  auto [tr, val] = data::split_holdout(train, holdout, uint64_t(c.task.data_seed));
  return {limit(tr, d.train_limit, tr->name() + " (limited)"), val,
          limit(test, d.test_limit, test->name() + " (limited)")};
}

}  // namespace qkv::tasks
