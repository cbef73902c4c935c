// TinyImageNet's text files: the input is wnids.txt, a NUL byte, then val/val_annotations.txt.
// load_tinyimagenet reads both for the val split (and wnids.txt for the train split). An
// annotation names an image under val/images/ that must exist, so the harness creates an empty
// file for each plain file name in the annotations' first column; reading one must then fail
// with a clear error, since it is not a JPEG.
#include <sstream>

#include "fuzz/support.h"
#include "train/data/image/image_dataset.h"

namespace {

// The first tab-separated field of each line, when it is a plain file name the file system can
// hold (at most 64 of them, each under NAME_MAX); other names stay missing files for the reader.
std::vector<std::string> image_names(std::string_view annotations) {
  std::vector<std::string> names;
  std::istringstream in{std::string(annotations)};
  for (std::string line; std::getline(in, line) && names.size() < 64;) {
    std::string name = line.substr(0, line.find('\t'));
    while (!name.empty() && (name.back() == ' ' || name.back() == '\r')) name.pop_back();
    if (!name.empty() && name.size() <= 200 && name != "." && name != ".." &&
        name.find_first_of("/ ") == std::string::npos && name.find('\0') == std::string::npos)
      names.push_back(name);
  }
  return names;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace qkv;
  const auto parts = fuzz::split_parts(fuzz::as_text(data, size), 2);
  const auto& dir = fuzz::fresh_scratch();
  fuzz::write_file(dir / "wnids.txt", parts[0]);
  fuzz::write_file(dir / "val" / "val_annotations.txt", parts[1]);
  for (const std::string& name : image_names(parts[1])) fuzz::write_file(dir / "val" / "images" / name, "");
  fuzz::run_reader([&] {
    const auto set = data::load_tinyimagenet(dir.string(), data::Split::test);
    for (int64_t i = 0; i < set->size(); ++i) (void)set->label(i);
    if (set->size() == 0) return;
    std::vector<uint8_t> pixels(size_t(set->height() * set->width() * set->channels()));
    set->read(0, pixels.data());
  });
  fuzz::run_reader([&] { (void)data::load_tinyimagenet(dir.string(), data::Split::train); });
  return 0;
}
