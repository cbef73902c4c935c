// Loading experiments: an experiment file with an optional named scale and command-line
// overrides (precedence file < scale < overrides), validated and expanded into runs; and suite
// files, `suite: [reverse.yaml, ...]`, that list experiment files relative to themselves.
#pragma once
#include <string>
#include <vector>

#include "lab/experiment/sweep.h"

namespace qkv::experiment {

struct Experiment {
  std::string path;       // the experiment file
  std::string scale;      // the applied scale, "" for none
  Config config;          // file < scale < overrides, validated
  std::vector<Run> runs;  // the sweep, every run validated
};

// ConfigError for anything invalid: unknown keys (also inside every scale, chosen or not), bad
// values, an unknown scale (the message lists the file's scales), a bad override (named).
Experiment load_experiment(const std::string& path, const std::string& scale = "",
                           const std::vector<std::string>& overrides = {});

// The scales an experiment file defines, in file order.
std::vector<std::string> scale_names(const std::string& path);

struct Suite {
  std::string path;
  std::vector<std::string> experiments;  // paths of the listed files, resolved against the suite's folder
};

// ConfigError when the file has other keys, the list is empty or repeats a file, or a listed
// file does not exist.
Suite load_suite(const std::string& path);

}  // namespace qkv::experiment
