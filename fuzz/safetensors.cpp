// safetensors: the input as a .safetensors file, through read_header and load (every tensor
// onto the CPU, with the metadata).
#include "io/safetensors.h"
#include "fuzz/support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace qkv;
  const auto path = fuzz::scratch() / "model.safetensors";
  fuzz::write_file(path, fuzz::as_text(data, size));
  fuzz::run_reader([&] { (void)safetensors::read_header(path.string()); });
  fuzz::run_reader([&] {
    safetensors::Metadata metadata;
    for (const auto& [name, t] : safetensors::load(path.string(), kCPU, &metadata)) (void)t.numel();
  });
  return 0;
}
