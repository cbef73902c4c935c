// dataset.json of a prepared language-model dataset: the input as DIR/dataset.json, read by
// read_dataset_info; each split it lists is then looked up by name, and "nope" must be refused.
#include "fuzz/support.h"
#include "train/data/tokens/prepare_dataset.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace qkv;
  const auto& dir = fuzz::scratch();
  fuzz::write_file(dir / "dataset.json", fuzz::as_text(data, size));
  fuzz::run_reader([&] {
    const data::DatasetInfo info = data::read_dataset_info(dir);
    for (const auto& [name, split] : info.splits) (void)info.split(name).shards.size();
    (void)info.split("nope");
  });
  return 0;
}
