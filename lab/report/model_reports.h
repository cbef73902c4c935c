// Parameters and multiply-accumulates of the synthetic encoder, the ViT and the set transformer
// of an experiment file, one row per attention variant of its sweep (first grid point), without
// data or training: the parameters counted on the built model (the (+) variants' 2D-score
// weights included), the multiply-accumulates of one example's forward counted from the op
// calls it makes (autograd/op_macs.h), the (+) variants' score table P.w included. The language
// models' reports (closed forms, checked against the same count) are lm_reports.h's.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "autograd/op_macs.h"
#include "lab/experiment/experiment.h"
#include "nn/module.h"

namespace qkv::report {

// A variant's model, built on demand, and one example's forward (batch 1) over it.
struct BuiltModel {
  std::unique_ptr<nn::Module> module;
  std::function<void()> forward;
};
struct FamilyModel {
  std::string variant;
  std::string example;  // what one forward reads: "one sequence of 16 tokens", ...
  std::function<BuiltModel()> build;
};
// The encoder, ViT or set transformer of each variant of a synthetic, vision or anomaly file;
// ValueError for a language-model file (lm_reports.h has those).
std::vector<FamilyModel> family_models(const experiment::Experiment& e);

// The multiply-accumulates of one example's forward, counted from its op calls (the model is
// built and run without a kernel launched).
autograd::MacCount example_macs(const FamilyModel& m);

std::string family_params_report(const std::vector<FamilyModel>& models);
std::string family_macs_report(const std::vector<FamilyModel>& models);

}  // namespace qkv::report
