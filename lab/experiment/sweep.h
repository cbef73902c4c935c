// Sweep expansion: an experiment's grid x variants x seeds as a list of runs, each a fully
// resolved and validated Config with a stable id such as
// "d_model=64,heads=4,layers=2,length=16/Q=K-V/seed0".
#pragma once
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lab/experiment/config.h"

namespace qkv::experiment {

struct Run {
  std::string id;  // "<grid point>/<variant>/seed<k>"; no grid: "<variant>/seed<k>"
  Config config;   // grid values applied; sweep reduced to this run's point, variant and seed
  nn::Variant variant;
  int seed = 0;
  std::vector<std::pair<std::string, std::string>> point;  // grid key -> value text, in id order
  std::string scale;  // the experiment file's scale the run was loaded at; "" for none
};

// Runs in a fixed order: grid points (keys sorted, each key's values in listed order, the last
// key fastest), then variants as listed, then seeds as listed. Each run's config is validated;
// an error names the run and points at the source of the offending value. The config of a run
// expands again to exactly that run.
std::vector<Run> expand_tree(const Node& tree);
std::vector<Run> expand(const Config& config);

// A path component: characters other than letters, digits and ._-+=() become '_'.
std::string sanitize_component(std::string_view text);

// The one run a run folder's config describes (its sweep holds one variant and one seed);
// ConfigError naming `origin` otherwise.
Run single_run(const Config& config, const std::string& origin);

}  // namespace qkv::experiment
