// Experiment configuration: the input is an experiment file's YAML, then NUL-separated a scale
// name and `key=value` overrides (as on the command line). It is loaded by load_experiment
// (validation and sweep expansion), and the same file read as a suite (load_suite) and as a run
// folder's config.yaml (load_config_file).
#include "fuzz/support.h"
#include "lab/experiment/experiment.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace qkv;
  const auto parts = fuzz::split_parts(fuzz::as_text(data, size), 8);
  const auto path = fuzz::scratch() / "experiment.yaml";
  fuzz::write_file(path, parts[0]);
  std::vector<std::string> overrides;
  for (size_t i = 2; i < parts.size(); ++i)
    if (!parts[i].empty()) overrides.emplace_back(parts[i]);
  fuzz::run_reader([&] { (void)experiment::load_experiment(path.string(), std::string(parts[1]), overrides); });
  fuzz::run_reader([&] { (void)experiment::load_suite(path.string()); });
  fuzz::run_reader([&] { (void)experiment::load_config_file(path.string()); });
  return 0;
}
