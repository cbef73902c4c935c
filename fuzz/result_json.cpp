// A run's result.json: the input as <out>/<experiment>/<run>/result.json, checked with
// RunDir::complete and read with RunDir::read_result (every field checked); a row that reads
// must give its one-line summary.
#include "fuzz/support.h"
#include "lab/experiment/run_dir.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace qkv;
  const auto& out = fuzz::scratch();
  const experiment::RunDir run(out, "exp", "d64/QKV/seed0");
  fuzz::write_file(run.path() / "result.json", fuzz::as_text(data, size));
  fuzz::run_reader([&] {
    (void)run.complete();
    (void)experiment::summary(run.read_result());
  });
  return 0;
}
