// load_tinyimagenet: the TinyImageNet folder layout. Classes are the lines of wnids.txt (class
// k is line k, 0-based); train images are train/<wnid>/images/*.JPEG, val images are listed in
// val/val_annotations.txt (file, wnid, x0, y0, x1, y1, tab-separated). JPEGs are decoded with
// stb_image on read (so on the loader's worker threads), grayscale promoted to RGB, and must be
// 64x64.
#include <stb_image.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "io/input_file.h"
#include "train/data/image/image_dataset.h"

namespace qkv::data {

namespace {

namespace fs = std::filesystem;

constexpr int kImageSide = 64;

class TinyImageNetDataset : public ImageDataset {
 public:
  TinyImageNetDataset(std::string name, std::vector<std::string> files, std::vector<int64_t> labels, int64_t classes)
      : name_(std::move(name)), files_(std::move(files)), labels_(std::move(labels)), classes_(classes) {}
  std::string name() const override { return name_; }
  int64_t size() const override { return int64_t(files_.size()); }
  int64_t height() const override { return kImageSide; }
  int64_t width() const override { return kImageSide; }
  int64_t channels() const override { return 3; }
  int64_t classes() const override { return classes_; }
  int64_t label(int64_t i) const override {
    check_index(i);
    return labels_[size_t(i)];
  }
  void read(int64_t i, uint8_t* pixels) const override;

 private:
  void check_index(int64_t i) const {
    check<IndexError>(i >= 0 && i < size(), name_, ": example ", i, " out of range for ", size(), " examples");
  }
  std::string name_;
  std::vector<std::string> files_;
  std::vector<int64_t> labels_;
  int64_t classes_;
};

// Decodes one JPEG as RGB into `pixels` (64*64*3 bytes).
void decode_jpeg(const std::string& path, uint8_t* pixels) {
  int w = 0, h = 0, comp = 0;
  // The size from the header first: a damaged header must not make stb allocate gigabytes.
  require_regular_file(path, "a TinyImageNet JPEG");
  check<IOError>(stbi_info(path.c_str(), &w, &h, &comp) == 1, path, ": cannot decode image: ", stbi_failure_reason());
  check<IOError>(w == kImageSide && h == kImageSide, path, ": image is ", w, "x", h, ", expected ", kImageSide, "x",
                 kImageSide);
  uint8_t* rgb = stbi_load(path.c_str(), &w, &h, &comp, 3);
  check<IOError>(rgb != nullptr, path, ": cannot decode image: ", stbi_failure_reason());
  if (w != kImageSide || h != kImageSide) {
    stbi_image_free(rgb);
    throw IOError(cat(path, ": image is ", w, "x", h, ", expected ", kImageSide, "x", kImageSide));
  }
  std::memcpy(pixels, rgb, size_t(kImageSide) * kImageSide * 3);
  stbi_image_free(rgb);
}

void TinyImageNetDataset::read(int64_t i, uint8_t* pixels) const {
  check_index(i);
  decode_jpeg(files_[size_t(i)], pixels);
}

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

std::ifstream open_text(const fs::path& path) {
  require_regular_file(path, "a TinyImageNet text file");
  std::ifstream in(path);
  check<IOError>(bool(in), path.string(), ": cannot open");
  return in;
}

// The class ids in line order; blank lines are allowed only at the end.
std::vector<std::string> read_wnids(const fs::path& path) {
  std::ifstream in = open_text(path);
  std::vector<std::string> wnids;
  std::string line;
  int64_t blank_at = 0;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    const std::string id = trim(line);
    if (id.empty()) {
      if (blank_at == 0) blank_at = n;
      continue;
    }
    check<IOError>(blank_at == 0, path.string(), ":", blank_at, ": blank line before the last class id");
    check<IOError>(id.find_first_of(" \t/\\") == std::string::npos && id != "." && id != "..", path.string(), ":", n,
                   ": expected one class id (wnid, a plain folder name) per line, got '", id, "'");
    check<IOError>(std::find(wnids.begin(), wnids.end(), id) == wnids.end(), path.string(), ":", n,
                   ": duplicate class id ", id);
    wnids.push_back(id);
  }
  check<IOError>(!wnids.empty(), path.string(), ": no class ids");
  return wnids;
}

bool is_jpeg(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return ext == ".jpeg" || ext == ".jpg";
}

// The JPEGs of one class folder, sorted by name.
std::vector<std::string> class_images(const fs::path& dir) {
  check<IOError>(fs::is_directory(dir), "tinyimagenet: missing folder ", dir.string());
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.is_regular_file() && is_jpeg(entry.path())) files.push_back(entry.path().string());
  check<IOError>(!files.empty(), "tinyimagenet: no .JPEG images in ", dir.string());
  std::sort(files.begin(), files.end());
  return files;
}

std::shared_ptr<ImageDataset> load_train(const fs::path& root, const std::vector<std::string>& wnids) {
  std::vector<std::string> files;
  std::vector<int64_t> labels;
  for (size_t k = 0; k < wnids.size(); ++k) {
    for (std::string& f : class_images(root / "train" / wnids[k] / "images")) files.push_back(std::move(f));
    labels.resize(files.size(), int64_t(k));
  }
  return std::make_shared<TinyImageNetDataset>("tinyimagenet/train", std::move(files), std::move(labels),
                                               int64_t(wnids.size()));
}

std::vector<std::string> split_tabs(const std::string& line) {
  std::vector<std::string> fields;
  std::istringstream in(line);
  for (std::string f; std::getline(in, f, '\t');) fields.push_back(trim(f));
  return fields;
}

bool is_integer(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

// One val annotation line -> (image path, class); IOError naming file:line when malformed.
std::pair<std::string, int64_t> parse_annotation(const std::string& line, const std::string& where,
                                                 const fs::path& images,
                                                 const std::unordered_map<std::string, int64_t>& classes) {
  const std::vector<std::string> f = split_tabs(line);
  check<IOError>(f.size() == 6 && !f[0].empty() && is_integer(f[2]) && is_integer(f[3]) && is_integer(f[4]) &&
                     is_integer(f[5]),
                 where, ": expected 6 tab-separated fields (file, wnid, x0, y0, x1, y1), got '", line, "'");
  // A file name, not a path: the annotations cannot point outside val/images/.
  check<IOError>(f[0].find('/') == std::string::npos && f[0] != "." && f[0] != "..", where, ": image '", f[0],
                 "' is not a plain file name in ", images.string());
  const auto cls = classes.find(f[1]);
  check<IOError>(cls != classes.end(), where, ": class id ", f[1], " is not in wnids.txt");
  const fs::path image = images / f[0];
  check<IOError>(fs::is_regular_file(image), where, ": missing image ", image.string());
  return {image.string(), cls->second};
}

std::shared_ptr<ImageDataset> load_val(const fs::path& root, const std::vector<std::string>& wnids) {
  std::unordered_map<std::string, int64_t> classes;
  for (size_t k = 0; k < wnids.size(); ++k) classes[wnids[k]] = int64_t(k);
  const fs::path path = root / "val" / "val_annotations.txt";
  std::ifstream in = open_text(path);
  std::vector<std::string> files;
  std::vector<int64_t> labels;
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (trim(line).empty()) continue;
    auto [file, label] = parse_annotation(line, cat(path.string(), ":", n), root / "val" / "images", classes);
    files.push_back(std::move(file));
    labels.push_back(label);
  }
  check<IOError>(!files.empty(), path.string(), ": no annotations");
  return std::make_shared<TinyImageNetDataset>("tinyimagenet/val", std::move(files), std::move(labels),
                                               int64_t(wnids.size()));
}

}  // namespace

std::shared_ptr<ImageDataset> load_tinyimagenet(const std::string& root, Split split) {
  const fs::path dir(root);
  const std::vector<std::string> wnids = read_wnids(dir / "wnids.txt");
  return split == Split::train ? load_train(dir, wnids) : load_val(dir, wnids);
}

}  // namespace qkv::data
