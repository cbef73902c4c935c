// load_idx_dataset: MNIST-style IDX files (big-endian header; magic 0x00000803 for [N, rows,
// cols] uint8 images, 0x00000801 for [N] uint8 labels), plain or gzip. zlib's gzread reads both
// (a plain file passes through unchanged), so one path streams either form straight into the
// image tensor.
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "io/input_file.h"
#include "train/data/image/image_dataset.h"

namespace qkv::data {

namespace {

namespace fs = std::filesystem;

constexpr uint32_t kImageMagic = 0x00000803, kLabelMagic = 0x00000801;

// `root/base` if it exists, else `root/base.gz`; IOError listing both otherwise.
std::string find_idx_file(const std::string& root, const std::string& base) {
  const fs::path plain = fs::path(root) / base, gz = fs::path(root) / (base + ".gz");
  std::error_code ec;
  if (fs::exists(plain, ec)) return (require_regular_file(plain, "an IDX file"), plain.string());
  if (fs::exists(gz, ec)) return (require_regular_file(gz, "a gzipped IDX file"), gz.string());
  throw IOError(cat("IDX: missing file: looked for ", plain.string(), " and ", gz.string()));
}

// An open IDX file (plain or gzip) that counts the decompressed bytes it has read.
class IdxReader {
 public:
  explicit IdxReader(std::string path)
      : path_(std::move(path)),
        file_size_(regular_file_size(path_, "an IDX file")),
        file_(gzopen(path_.c_str(), "rb")) {
    check<IOError>(file_ != nullptr, path_, ": cannot open");
    gzbuffer(file_, 1 << 17);
  }
  ~IdxReader() { gzclose(file_); }
  IdxReader(const IdxReader&) = delete;
  IdxReader& operator=(const IdxReader&) = delete;

  const std::string& path() const { return path_; }
  int64_t consumed() const { return consumed_; }

  // Reads up to n bytes; returns how many arrived (fewer only at the end of the file).
  int64_t read(void* dst, int64_t n) {
    int64_t got = 0;
    while (got < n) {
      const unsigned chunk = unsigned(std::min<int64_t>(n - got, int64_t(1) << 24));
      const int r = gzread(file_, static_cast<char*>(dst) + got, chunk);
      if (r < 0) {
        int code = 0;
        throw IOError(cat(path_, ": cannot decompress: ", gzerror(file_, &code)));
      }
      if (r == 0) break;
      got += r;
    }
    consumed_ += got;
    return got;
  }

  uint32_t read_be32() {
    unsigned char b[4];
    const int64_t before = consumed_, got = read(b, 4);
    check<IOError>(got == 4, path_, ": truncated header: expected at least ", before + 4, " bytes, got ", before + got);
    return (uint32_t(b[0]) << 24) | (uint32_t(b[1]) << 16) | (uint32_t(b[2]) << 8) | uint32_t(b[3]);
  }

  // IOError unless `n` more bytes can follow what was read: in a plain file they must be there;
  // deflate expands at most 1032-fold, which bounds a gzip file's content.
  void check_can_hold(int64_t n) {
    const bool plain = gzdirect(file_) == 1;
    const uint64_t most = plain ? file_size_ - uint64_t(consumed_) : file_size_ * 1032;
    check_fits_file(path_, plain ? "IDX data" : "IDX data (decompressed)", uint64_t(n), most);
  }

  // Bytes left after the expected content (0 for a well-formed file).
  int64_t count_rest() {
    char buf[1 << 14];
    int64_t extra = 0, r = 0;
    while ((r = read(buf, sizeof buf)) > 0) extra += r;
    return extra;
  }

 private:
  std::string path_;
  uint64_t file_size_;
  gzFile file_;
  int64_t consumed_ = 0;
};

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

void check_magic(IdxReader& f, uint32_t expected, const char* what) {
  const uint32_t magic = f.read_be32();
  check<IOError>(magic == expected, f.path(), ": bad magic ", hex32(magic), ", expected ", hex32(expected), " (IDX ",
                 what, ")");
}

// Header sizes whose product could not be a real file (guards the allocation against garbage).
void check_plausible(const std::string& path, int64_t n, int64_t rows, int64_t cols) {
  check<IOError>(rows > 0 && cols > 0 && rows <= 65536 && cols <= 65536 && n <= (int64_t(1) << 36) / (rows * cols),
                 path, ": implausible header: ", n, " images of ", rows, "x", cols);
}

// Reads exactly n payload bytes after a header of `header` bytes, then checks nothing follows.
void read_payload(IdxReader& f, void* dst, int64_t n, int64_t header) {
  const int64_t got = f.read(dst, n);
  check<IOError>(got == n, f.path(), ": truncated: expected ", header + n, " bytes, got ", header + got);
  const int64_t extra = f.count_rest();
  check<IOError>(extra == 0, f.path(), ": expected ", header + n, " bytes, got ", header + n + extra,
                 " (trailing data)");
}

Tensor read_idx_images(const std::string& path) {
  IdxReader f(path);
  check_magic(f, kImageMagic, "images: 3 dims of uint8");
  const int64_t n = f.read_be32(), rows = f.read_be32(), cols = f.read_be32();
  check_plausible(path, n, rows, cols);
  f.check_can_hold(n * rows * cols);
  Tensor images = empty({n, rows, cols, 1}, DType::u8);
  read_payload(f, images.data<uint8_t>(), n * rows * cols, 16);
  return images;
}

Tensor read_idx_labels(const std::string& path, int64_t classes) {
  IdxReader f(path);
  check_magic(f, kLabelMagic, "labels: 1 dim of uint8");
  const int64_t n = f.read_be32();
  f.check_can_hold(n);
  std::vector<uint8_t> raw(static_cast<size_t>(n));
  read_payload(f, raw.data(), n, 8);
  std::vector<int64_t> labels(raw.begin(), raw.end());
  for (int64_t i = 0; i < n; ++i)
    check<IOError>(labels[size_t(i)] < classes, path, ": label ", labels[size_t(i)], " of example ", i,
                   " out of range: expected 0..", classes - 1);
  return from_vector(labels);
}

}  // namespace

std::shared_ptr<ImageDataset> load_idx_dataset(const std::string& root, Split split, const std::string& name,
                                               int64_t classes) {
  check<ValueError>(classes >= 1 && classes <= 256, name, ": classes must lie in 1..256, got ", classes);
  const std::string prefix = split == Split::train ? "train" : "t10k";
  const std::string image_path = find_idx_file(root, prefix + "-images-idx3-ubyte");
  const std::string label_path = find_idx_file(root, prefix + "-labels-idx1-ubyte");
  Tensor images = read_idx_images(image_path);
  Tensor labels = read_idx_labels(label_path, classes);
  check<IOError>(images.size(0) == labels.size(0), image_path, " holds ", images.size(0), " images but ", label_path,
                 " holds ", labels.size(0), " labels: expected the same count");
  const std::string full_name = name + (split == Split::train ? "/train" : "/test");
  return std::make_shared<MemoryImageDataset>(full_name, std::move(images), std::move(labels), classes);
}

}  // namespace qkv::data
