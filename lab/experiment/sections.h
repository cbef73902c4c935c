// The sections several task families share: the optimizer, the two learning-rate schedules
// (counted in epochs, or in steps for language models), the two training loops' settings and
// the sweep. Each struct declares its keys once in its schema() (sections.cpp); a family
// (families.h) combines the sections it accepts.
#pragma once
#include <array>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lab/experiment/schema.h"
#include "nn/variant.h"
#include "train/loops/nonfinite.h"
#include "train/loops/precision.h"
#include "train/optim/optimizer.h"

namespace qkv::experiment {

enum class OptimName { adam, adamw, sgd };
enum class ScheduleName { cosine, multistep, constant };
// How the epoch loop picks the tested weights: the best validation on a split held out of the
// training set, or the whole training set and the weights after the last epoch.
enum class Protocol { holdout_best, all_last };

template <> struct EnumNames<OptimName> {
  static constexpr std::array<std::pair<std::string_view, OptimName>, 3> values{
      {{"adam", OptimName::adam}, {"adamw", OptimName::adamw}, {"sgd", OptimName::sgd}}};
};
template <> struct EnumNames<optim::DecayRule> {
  static constexpr std::array<std::pair<std::string_view, optim::DecayRule>, 2> values{
      {{"matrices", optim::DecayRule::matrices}, {"all", optim::DecayRule::all}}};
};
template <> struct EnumNames<loops::Precision> {
  static constexpr std::array<std::pair<std::string_view, loops::Precision>, 3> values{
      {{"fp32", loops::Precision::fp32}, {"bf16", loops::Precision::bf16}, {"fp16", loops::Precision::f16}}};
};
template <> struct EnumNames<loops::OnNonfinite> {
  static constexpr std::array<std::pair<std::string_view, loops::OnNonfinite>, 2> values{
      {{"skip", loops::OnNonfinite::skip}, {"stop", loops::OnNonfinite::stop}}};
};
template <> struct EnumNames<Protocol> {
  static constexpr std::array<std::pair<std::string_view, Protocol>, 2> values{
      {{"holdout_best", Protocol::holdout_best}, {"all_last", Protocol::all_last}}};
};
template <> struct EnumNames<ScheduleName> {
  static constexpr std::array<std::pair<std::string_view, ScheduleName>, 3> values{
      {{"cosine", ScheduleName::cosine}, {"multistep", ScheduleName::multistep}, {"constant", ScheduleName::constant}}};
};

struct OptimConfig {
  OptimName name{};
  double lr = 0, beta1 = 0, beta2 = 0, eps = 0, weight_decay = 0, momentum = 0, clip = 0;
  bool operator==(const OptimConfig&) const = default;
  static const Schema<OptimConfig>& schema();
};

// The language-model loop's AdamW: which parameters weight decay applies to (the other families
// decay every parameter their optimizer holds).
struct LmOptim : OptimConfig {
  optim::DecayRule decay{};
  bool operator==(const LmOptim&) const = default;
  static const Schema<LmOptim>& schema();
};

// Warmup and floor, shared by both schedules.
struct ScheduleBase {
  double warmup = 0;     // fraction of the total steps
  int warmup_steps = 0;  // in steps; overrides the fraction when > 0
  double min_lr = 0;
  bool operator==(const ScheduleBase&) const = default;
  static const Schema<ScheduleBase>& schema();
};
// Epoch-based training: cosine, constant, or multistep with milestones in epochs.
struct EpochSchedule : ScheduleBase {
  ScheduleName name{};
  std::vector<int> milestones;
  double gamma = 0;
  bool operator==(const EpochSchedule&) const = default;
  static const Schema<EpochSchedule>& schema();
};
// Step-counted training (language models): cosine or constant.
struct StepSchedule : ScheduleBase {
  ScheduleName name{};
  bool operator==(const StepSchedule&) const = default;
  static const Schema<StepSchedule>& schema();
};

// Settings both training loops read.
struct LoopConfig {
  int batch_size = 0;
  int eval_batch_size = 0;
  Device device;
  int threads = 0;  // 0 = all cores
  int log_every = 0;
  loops::OnNonfinite on_nonfinite{};  // a step with a NaN or inf loss or gradient norm: skip it, or stop
  int max_consecutive_skips = 0;      // more non-finite steps in a row stop the run as diverged
  loops::Precision precision{};       // requested; loops::choose_precision says what a run gets
  double bucket_mb = 0;               // data-parallel gradient all-reduce bucket, MiB
  bool operator==(const LoopConfig&) const = default;
  static const Schema<LoopConfig>& schema();
};
// The epoch loop of the classification families.
struct EpochTrain : LoopConfig {
  int epochs = 0;
  Protocol protocol{};
  int evals_per_epoch = 0;  // validations per epoch, evenly spaced; the best of all is tested
  bool operator==(const EpochTrain&) const = default;
  static const Schema<EpochTrain>& schema();
};
// The step-counted language-model loop.
struct StepTrain : LoopConfig {
  int steps = 0;
  int grad_accum = 0;  // micro-batches per optimizer step
  int eval_every = 0;  // steps between validations (and checkpoints)
  int eval_batches = 0;
  int keep_checkpoints = 0;
  double skip_grad_norm = 0;  // a step whose gradient norm exceeds this is made again; 0 = never
  double peak_tflops = 0;     // the device's peak for MFU; 0 = known GPU table, else a measured GEMM
  bool operator==(const StepTrain&) const = default;
  static const Schema<StepTrain>& schema();
};

// One swept key and its values (nodes, checked against the key's type, sources kept).
struct GridAxis {
  std::string key;  // dotted key of the family: "model.d_model"
  std::vector<Node> values;
  bool operator==(const GridAxis&) const = default;
};
using Grid = std::vector<GridAxis>;

struct SweepConfig {
  Grid grid;
  std::vector<nn::Variant> variants;
  std::vector<int> seeds;
  bool operator==(const SweepConfig&) const = default;
  static const Schema<SweepConfig>& schema();
};

template <> struct Codec<nn::Variant> {
  static std::string type();
  static bool parse(const Node& n, nn::Variant& out, const std::string& key);
  static Node emit(const nn::Variant& v);
};

template <> struct Codec<Grid> {
  static std::string type();
  static bool parse(const Node& n, Grid& out, const std::string& key);  // shape only; keys: grid_field
  static Node emit(const Grid& g);
};

}  // namespace qkv::experiment
