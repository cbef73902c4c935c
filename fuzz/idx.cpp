// IDX (MNIST): load_idx_dataset on a folder holding train-images-idx3-ubyte and
// train-labels-idx1-ubyte, plain or gzip (the reader tells them apart by content). The first
// input byte says which file the rest of the input is; the other one is written well-formed,
// with the count the input's header announces (when small), so the pair can load and be read.
#include "fuzz/support.h"
#include "train/data/image/image_dataset.h"

namespace {

uint32_t be32(std::string_view s, size_t at) {
  if (s.size() < at + 4) return 0;
  const auto b = [&](size_t i) { return uint32_t(uint8_t(s[at + i])); };
  return (b(0) << 24) | (b(1) << 16) | (b(2) << 8) | b(3);
}

std::string be32_bytes(uint32_t v) { return {char(v >> 24), char(v >> 16), char(v >> 8), char(v)}; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace qkv;
  if (size == 0) return 0;
  const bool labels_given = data[0] & 1;
  const std::string_view input = fuzz::as_text(data + 1, size - 1);
  const uint32_t n = std::min<uint32_t>(be32(input, 4), 1 << 12);
  const auto& dir = fuzz::scratch();
  const std::string images = be32_bytes(0x803) + be32_bytes(n) + be32_bytes(1) + be32_bytes(1) + std::string(n, '\7');
  const std::string labels = be32_bytes(0x801) + be32_bytes(n) + std::string(n, '\3');
  fuzz::write_file(dir / "train-images-idx3-ubyte", labels_given ? std::string_view(images) : input);
  fuzz::write_file(dir / "train-labels-idx1-ubyte", labels_given ? input : std::string_view(labels));
  fuzz::run_reader([&] {
    const auto set = data::load_idx_dataset(dir.string(), data::Split::train, "mnist");
    if (set->size() == 0) return;
    std::vector<uint8_t> pixels(size_t(set->height() * set->width() * set->channels()));
    set->read(set->size() - 1, pixels.data());
    (void)set->label(0);
  });
  return 0;
}
