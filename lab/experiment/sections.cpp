// The shared sections' keys (name, member, default, rule, doc), the variant and grid codecs,
// and the sweep grid's checks against the family's keys.
#include "lab/experiment/sections.h"

#include <algorithm>
#include <set>

namespace qkv::experiment {

namespace {

Rule<std::vector<int>> increasing_epochs() {
  return {"(epochs >= 1, increasing)", [](std::vector<int>& v) {
            for (size_t i = 0; i < v.size(); ++i)
              if (v[i] < 1 || (i > 0 && v[i] <= v[i - 1])) return false;
            return true;
          }};
}

Rule<std::vector<nn::Variant>> variant_list() {
  return {"(non-empty, no repeats)", [](std::vector<nn::Variant>& v) {
            std::set<std::string> names;
            for (const nn::Variant& x : v) names.insert(nn::variant_name(x));
            return !v.empty() && names.size() == v.size();
          }};
}

Rule<double> unit_closed_above() {
  return {"in (0, 1]", [](double& v) { return v > 0 && v <= 1; }};
}

Rule<ScheduleName> step_schedule_name() {
  return {"(cosine or constant: language models count steps, not epochs)",
          [](ScheduleName& n) { return n != ScheduleName::multistep; }};
}

// Keys a grid may not sweep, and why.
std::string unsweepable(const std::string& key) {
  if (key.starts_with("sweep.")) return "the sweep cannot sweep itself";
  if (key == "name") return "it names the experiment";
  if (key == "task.kind") return "it selects the task family, whose keys the whole file follows";
  return "";
}

// sweep.grid: a map from the family's dotted keys to non-empty lists of values valid for them.
FieldDef<SweepConfig> grid_field() {
  FieldDef<SweepConfig> f = field("grid", &SweepConfig::grid, {}, "dotted key -> values; runs take every combination");
  f.parse = [](SweepConfig& s, const Node& n, const std::string& grid_key, const ParseContext& ctx) {
    s.grid.clear();
    if (n.is_null()) return;
    if (!n.is_map()) fail_at(n.source, grid_key, ": ", n.describe(), " is not valid: expected ", Codec<Grid>::type());
    std::vector<std::string> leaves;
    for (const KeyInfo& k : ctx.keys)
      if (!k.section && unsweepable(k.key).empty()) leaves.push_back(k.key);
    for (const Entry& e : n.entries) {
      const std::string key = grid_key + "." + e.key;
      if (const std::string why = key_set_elsewhere(e.key); !why.empty()) fail_at(e.source, key, ": ", e.key, " ", why);
      const KeyInfo* info = ctx.find(e.key);
      if (!info || info->section) {
        if (auto it = ctx.elsewhere.find(e.key); it != ctx.elsewhere.end())
          fail_at(e.source, key, ": ", e.key, " is not a setting of ", ctx.family, " experiments; it belongs to ",
                  it->second, " experiments");
        const std::string suggestion = closest_key(e.key, leaves);
        if (!suggestion.empty()) fail_at(e.source, "unknown key '", key, "'; did you mean '", suggestion, "'?");
        fail_at(e.source, "unknown key '", key, "': grid keys are dotted keys of the file such as model.d_model");
      }
      if (const std::string why = unsweepable(e.key); !why.empty()) fail_at(e.source, key, ": cannot be swept: ", why);
      const Node& list = e.value;
      if (!list.is_sequence() || list.items.empty())
        fail_at(list.source, key, ": ", list.describe(), " is not valid: expected a non-empty list of ", info->type);
      for (size_t i = 0; i < list.items.size(); ++i) {
        info->check(list.items[i], cat(key, "[", i, "]"));
        for (size_t j = 0; j < i; ++j)
          if (list.items[j] == list.items[i])
            fail_at(list.items[i].source, key, ": ", list.items[i].describe(), " is listed twice");
      }
      s.grid.push_back(GridAxis{e.key, list.items});
    }
  };
  return f;
}

}  // namespace

const Schema<OptimConfig>& OptimConfig::schema() {
  using T = OptimConfig;
  static const Schema<T> s{{
      field("name", &T::name, OptimName::adam, "optimizer"),
      field("lr", &T::lr, 1e-3, greater_than(0.0), "peak learning rate"),
      field("beta1", &T::beta1, 0.9, in_half_open(0.0, 1.0), "Adam first-moment decay"),
      field("beta2", &T::beta2, 0.999, in_half_open(0.0, 1.0), "Adam second-moment decay"),
      field("eps", &T::eps, 1e-8, greater_than(0.0), "Adam epsilon"),
      field("weight_decay", &T::weight_decay, 0.0, at_least(0.0), "weight decay (decoupled for adamw)"),
      field("momentum", &T::momentum, 0.9, in_half_open(0.0, 1.0), "momentum (sgd only)"),
      field("clip", &T::clip, 5.0, at_least(0.0), "gradient-norm clipping; 0 disables"),
  }};
  return s;
}

const Schema<LmOptim>& LmOptim::schema() {
  using T = LmOptim;
  static const Schema<T> s = [] {
    std::vector<FieldDef<T>> f =
        fields(inherit<T>(OptimConfig::schema()),
               {
                   field("decay", &T::decay, optim::DecayRule::matrices,
                         "what weight decay applies to: matrices (and embeddings; not biases or LayerNorm) or all "
                         "parameters"),
               });
    // Language models train with AdamW (decoupled weight decay) unless the file says otherwise.
    OptimName T::*name = &T::name;
    *std::find_if(f.begin(), f.end(), [](const FieldDef<T>& d) { return d.name == "name"; }) =
        field("name", name, OptimName::adamw, "optimizer");
    return Schema<T>{f};
  }();
  return s;
}

const Schema<ScheduleBase>& ScheduleBase::schema() {
  using T = ScheduleBase;
  static const Schema<T> s{{
      field("warmup", &T::warmup, 0.05, in_half_open(0.0, 1.0), "linear warmup, fraction of the total steps"),
      field("warmup_steps", &T::warmup_steps, 0, at_least(0), "linear warmup in steps; overrides warmup when > 0"),
      field("min_lr", &T::min_lr, 0.0, at_least(0.0), "final learning rate of the cosine schedule"),
  }};
  return s;
}

const Schema<EpochSchedule>& EpochSchedule::schema() {
  using T = EpochSchedule;
  static const Schema<T> s{
      fields<T>({field("name", &T::name, ScheduleName::cosine, "learning-rate schedule")},
                fields(inherit<T>(ScheduleBase::schema()),
                       {field("milestones", &T::milestones, {}, increasing_epochs(),
                              "multistep: epochs where lr *= gamma"),
                        field("gamma", &T::gamma, 0.1, unit_closed_above(), "multistep: decay factor")})),
      [](const T& sch, const Located& at) {
        if (sch.name == ScheduleName::multistep && sch.milestones.empty())
          at.fail("milestones", "[]", "a non-empty list of epochs when schedule.name is multistep");
      }};
  return s;
}

const Schema<StepSchedule>& StepSchedule::schema() {
  using T = StepSchedule;
  static const Schema<T> s{
      fields<T>({field("name", &T::name, ScheduleName::cosine, step_schedule_name(), "learning-rate schedule")},
                inherit<T>(ScheduleBase::schema()))};
  return s;
}

const Schema<LoopConfig>& LoopConfig::schema() {
  using T = LoopConfig;
  static const Schema<T> s{{
      field("batch_size", &T::batch_size, 128, in_range(1, 1 << 20),
            "training batch size, of the whole job: data-parallel ranks each take their share"),
      field("device", &T::device, kCPU, "where to train"),
      field("threads", &T::threads, 0, in_range(0, 4096), "CPU threads; 0 = all cores"),
      field("log_every", &T::log_every, 50, at_least(1), "steps between loss lines"),
      field("eval_batch_size", &T::eval_batch_size, 512, in_range(1, 1 << 20), "batch size of validation and test"),
      field("on_nonfinite", &T::on_nonfinite, loops::OnNonfinite::skip,
            "a step whose loss or gradient norm is NaN or inf is not applied: skip it, or stop the run as diverged"),
      field("max_consecutive_skips", &T::max_consecutive_skips, 10, at_least(0),
            "more non-finite steps in a row than this stop the run as diverged; 0 = the first one does"),
      field("precision", &T::precision, loops::Precision::fp32,
            "compute precision: fp32; bf16 autocast (matmuls, attention, convolutions in bf16; float32 "
            "weights, optimizer, norms, losses; on the CPU bf16 storage computed in float32); or fp16, the "
            "same in float16 with a dynamic loss scale"),
      field("bucket_mb", &T::bucket_mb, 25.0, greater_than(0.0),
            "data-parallel runs: MiB of gradients per all-reduce, started while the backward pass runs"),
  }};
  return s;
}

const Schema<EpochTrain>& EpochTrain::schema() {
  using T = EpochTrain;
  static const Schema<T> s{
      fields<T>({field("epochs", &T::epochs, 2, in_range(1, 1 << 20), "passes over the training set"),
                 field("protocol", &T::protocol, Protocol::holdout_best,
                       "holdout_best: validate on a held-out split, test the best weights; all_last: train on "
                       "all training data, test the weights after the last epoch"),
                 field("evals_per_epoch", &T::evals_per_epoch, 1, in_range(1, 1 << 16),
                       "validations per epoch, evenly spaced in batches; the best of all is tested")},
                inherit<T>(LoopConfig::schema())),
      [](const T& t, const Located& at) {
        if (t.protocol == Protocol::all_last && t.evals_per_epoch != 1)
          at.fail("evals_per_epoch", t.evals_per_epoch, "1 when train.protocol is all_last (no validation)");
      }};
  return s;
}

const Schema<StepTrain>& StepTrain::schema() {
  using T = StepTrain;
  static const Schema<T> s{fields<T>(
      {
          field("steps", &T::steps, 1000, at_least(1), "optimizer steps"),
          field("grad_accum", &T::grad_accum, 1, in_range(1, 1 << 16),
                "micro-batches of batch_size per optimizer step"),
          field("eval_every", &T::eval_every, 100, at_least(1), "steps between validations and checkpoints"),
          field("eval_batches", &T::eval_batches, 20, in_range(1, 1 << 20), "validation batches (of eval_batch_size)"),
          field("keep_checkpoints", &T::keep_checkpoints, 2, in_range(1, 1000), "newest checkpoints kept"),
          field("skip_grad_norm", &T::skip_grad_norm, 0.0, at_least(0.0),
                "an optimizer step whose gradient norm exceeds this is not applied and is made again on the next "
                "batches (the official code's rule); 0 = never"),
          field("peak_tflops", &T::peak_tflops, 0.0, at_least(0.0),
                "device peak TFLOP/s for MFU; 0 = a known GPU's dense peak for the precision (H200, H100, A100, "
                "L40S, ...), else a GEMM measured at start"),
      },
      inherit<T>(LoopConfig::schema()))};
  return s;
}

const Schema<SweepConfig>& SweepConfig::schema() {
  using T = SweepConfig;
  static const Schema<T> s{{
      grid_field(),
      field("variants", &T::variants, {nn::Variant{}}, variant_list(), "attention variants to run"),
      field("seeds", &T::seeds, {0}, int_list(0, true, true), "training seeds to run"),
  }};
  return s;
}

// ---- codecs ----------------------------------------------------------------------------------

std::string Codec<nn::Variant>::type() { return "variant name"; }

bool Codec<nn::Variant>::parse(const Node& n, nn::Variant& out, const std::string& key) {
  if (!n.is_scalar()) return false;
  auto v = nn::try_parse_variant(n.text);
  if (!v) fail_at(n.source, key, ": unknown variant '", n.text, "'; accepted: ", nn::accepted_variant_forms());
  out = *v;
  return true;
}

Node Codec<nn::Variant>::emit(const nn::Variant& v) { return Node::scalar(nn::variant_name(v)); }

std::string Codec<Grid>::type() { return "map: dotted key -> non-empty list of values"; }

bool Codec<Grid>::parse(const Node& n, Grid& out, const std::string& grid_key) {
  if (n.is_null()) {
    out.clear();
    return true;
  }
  if (!n.is_map()) return false;
  Grid grid;
  for (const Entry& e : n.entries) {
    if (!e.value.is_sequence() || e.value.items.empty())
      fail_at(e.value.source, grid_key, ".", e.key, ": ", e.value.describe(),
              " is not valid: expected a non-empty list of values");
    grid.push_back(GridAxis{e.key, e.value.items});
  }
  out = std::move(grid);
  return true;
}

Node Codec<Grid>::emit(const Grid& g) {
  Node n = Node::map();
  for (const GridAxis& axis : g) n.add(axis.key, Node::sequence(axis.values), {});
  return n;
}

}  // namespace qkv::experiment
