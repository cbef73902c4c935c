// CIFAR binary: the input as CIFAR-10's test_batch.bin and as CIFAR-100's test.bin, loaded with
// load_cifar10 and load_cifar100 (fine and coarse labels), and the last example read back.
#include "fuzz/support.h"
#include "train/data/image/image_dataset.h"

namespace {

void read_last(const qkv::data::ImageDataset& set) {
  if (set.size() == 0) return;
  std::vector<uint8_t> pixels(size_t(set.height() * set.width() * set.channels()));
  set.read(set.size() - 1, pixels.data());
  (void)set.label(set.size() - 1);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace qkv;
  const auto& dir = fuzz::scratch();
  fuzz::write_file(dir / "test_batch.bin", fuzz::as_text(data, size));
  fuzz::write_file(dir / "test.bin", fuzz::as_text(data, size));
  fuzz::run_reader([&] { read_last(*data::load_cifar10(dir.string(), data::Split::test)); });
  fuzz::run_reader([&] { read_last(*data::load_cifar100(dir.string(), data::Split::test, false)); });
  fuzz::run_reader([&] { read_last(*data::load_cifar100(dir.string(), data::Split::test, true)); });
  return 0;
}
