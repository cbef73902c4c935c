// load_cifar10 / load_cifar100: the CIFAR binary formats. A record is its label byte(s) followed
// by 3072 pixel bytes as three 32x32 planes (R, G, B); records are converted to HWC on load.
// CIFAR-10 training uses whichever of data_batch_1..5.bin are present and says how many.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "io/input_file.h"
#include "train/data/image/image_dataset.h"

namespace qkv::data {

namespace {

namespace fs = std::filesystem;

constexpr int64_t kSide = 32, kPlane = kSide * kSide, kPixels = 3 * kPlane;

// The layout of one record: how many label bytes precede the pixels, and which one is used.
struct RecordFormat {
  int64_t label_bytes;                // 1 (CIFAR-10) or 2 (CIFAR-100: coarse, fine)
  int64_t label_index;                // which label byte is the class
  std::vector<int64_t> label_limits;  // classes for each label byte, all checked
  int64_t record_bytes() const { return label_bytes + kPixels; }
};

std::vector<uint8_t> read_file(const fs::path& path) {
  const uint64_t size = regular_file_size(path, "a CIFAR binary batch");
  std::ifstream in(path, std::ios::binary);
  check<IOError>(bool(in), path.string(), ": cannot open");
  std::vector<uint8_t> bytes(size_t(size), 0);
  in.read(reinterpret_cast<char*>(bytes.data()), std::streamsize(bytes.size()));
  check<IOError>(in.gcount() == std::streamsize(bytes.size()), path.string(), ": short read: expected ", bytes.size(),
                 " bytes, got ", in.gcount());
  return bytes;
}

void check_record_count(const fs::path& path, int64_t bytes, int64_t record) {
  const int64_t records = (bytes + record - 1) / record;
  check<IOError>(bytes > 0 && bytes % record == 0, path.string(), ": truncated: expected ",
                 std::max<int64_t>(records, 1) * record, " bytes (whole ", record, "-byte records), got ", bytes);
}

void check_labels(const fs::path& path, const uint8_t* record, int64_t index, const RecordFormat& f) {
  for (int64_t b = 0; b < f.label_bytes; ++b)
    check<IOError>(record[b] < f.label_limits[size_t(b)], path.string(), ": record ", index, " has label ",
                   int(record[b]), ", expected 0..", f.label_limits[size_t(b)] - 1);
}

// Planes (C, H, W) -> interleaved (H, W, C).
void chw_to_hwc(const uint8_t* chw, uint8_t* hwc) {
  for (int64_t p = 0; p < kPlane; ++p)
    for (int64_t c = 0; c < 3; ++c) hwc[p * 3 + c] = chw[c * kPlane + p];
}

// The number of records in `path`, checking that it holds whole records.
int64_t count_records(const fs::path& path, const RecordFormat& f) {
  const int64_t bytes = int64_t(regular_file_size(path, "a CIFAR binary batch"));
  check_record_count(path, bytes, f.record_bytes());
  return bytes / f.record_bytes();
}

// Decodes the n records of one file into examples first..first+n-1 of `pixels` and `labels`.
void decode_file(const fs::path& path, const RecordFormat& f, int64_t first, uint8_t* pixels, int64_t* labels) {
  const std::vector<uint8_t> bytes = read_file(path);
  check_record_count(path, int64_t(bytes.size()), f.record_bytes());
  const int64_t n = int64_t(bytes.size()) / f.record_bytes();
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* record = bytes.data() + i * f.record_bytes();
    check_labels(path, record, i, f);
    labels[first + i] = record[f.label_index];
    chw_to_hwc(record + f.label_bytes, pixels + (first + i) * kPixels);
  }
}

std::shared_ptr<ImageDataset> load_files(const std::vector<fs::path>& files, const RecordFormat& f,
                                         const std::string& name) {
  std::vector<int64_t> first{0};
  for (const fs::path& path : files) first.push_back(first.back() + count_records(path, f));
  Tensor images = empty({first.back(), kSide, kSide, 3}, DType::u8);
  Tensor labels = empty({first.back()}, DType::i64);
  for (size_t k = 0; k < files.size(); ++k)
    decode_file(files[k], f, first[k], images.data<uint8_t>(), labels.data<int64_t>());
  return std::make_shared<MemoryImageDataset>(name, std::move(images), std::move(labels),
                                              f.label_limits[size_t(f.label_index)]);
}

fs::path require_file(const std::string& root, const std::string& file, const char* dataset) {
  const fs::path path = fs::path(root) / file;
  check<IOError>(fs::is_regular_file(path), dataset, ": missing file ", path.string());
  return path;
}

std::vector<fs::path> cifar10_train_files(const std::string& root) {
  std::vector<fs::path> found;
  for (int b = 1; b <= 5; ++b) {
    const fs::path path = fs::path(root) / cat("data_batch_", b, ".bin");
    if (fs::is_regular_file(path)) found.push_back(path);
  }
  check<IOError>(!found.empty(), "cifar10: no training batches: looked for data_batch_1.bin .. data_batch_5.bin in ",
                 root);
  return found;
}

}  // namespace

std::shared_ptr<ImageDataset> load_cifar10(const std::string& root, Split split) {
  const RecordFormat format{1, 0, {10}};
  if (split == Split::test)
    return load_files({require_file(root, "test_batch.bin", "cifar10")}, format, "cifar10/test");
  const std::vector<fs::path> files = cifar10_train_files(root);
  auto data = load_files(files, format, "cifar10/train");
  std::cout << "cifar10: " << files.size() << " of 5 training batches, " << data->size() << " images" << std::endl;
  return data;
}

std::shared_ptr<ImageDataset> load_cifar100(const std::string& root, Split split, bool coarse_labels) {
  const RecordFormat format{2, coarse_labels ? 0 : 1, {20, 100}};
  const bool train = split == Split::train;
  const fs::path path = require_file(root, train ? "train.bin" : "test.bin", "cifar100");
  return load_files({path}, format, cat("cifar100", coarse_labels ? "-coarse" : "", train ? "/train" : "/test"));
}

}  // namespace qkv::data
