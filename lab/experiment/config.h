// The experiment configuration of the synthetic tasks (paper Table 1): typed structs whose
// fields, defaults, rules and docs are declared once in config.cpp, and the entry points that
// parse a tree strictly into a Config, write a Config back as YAML, and describe the schema.
#pragma once
#include <array>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lab/experiment/schema.h"
#include "lab/experiment/variant.h"

namespace qkv::experiment {

enum class TaskName { reverse, sort, sub, swap, copy };
enum class Activation { relu, gelu };
enum class Norm { post, pre };
enum class HeadKind { mlp, linear };
enum class OptimName { adam, adamw, sgd };
enum class ScheduleName { cosine, multistep, constant };
enum class DatasetName { mnist, fashion_mnist, cifar10, cifar100, tinyimagenet };
enum class FeatureSource { resnet34, file };
enum class LmSamplingName { packed, per_document };

template <>
struct EnumNames<TaskName> {
  static constexpr std::array<std::pair<std::string_view, TaskName>, 5> values{{{"reverse", TaskName::reverse},
                                                                                {"sort", TaskName::sort},
                                                                                {"sub", TaskName::sub},
                                                                                {"swap", TaskName::swap},
                                                                                {"copy", TaskName::copy}}};
};
template <>
struct EnumNames<Activation> {
  static constexpr std::array<std::pair<std::string_view, Activation>, 2> values{
      {{"relu", Activation::relu}, {"gelu", Activation::gelu}}};
};
template <>
struct EnumNames<Norm> {
  static constexpr std::array<std::pair<std::string_view, Norm>, 2> values{{{"post", Norm::post}, {"pre", Norm::pre}}};
};
template <>
struct EnumNames<HeadKind> {
  static constexpr std::array<std::pair<std::string_view, HeadKind>, 2> values{
      {{"mlp", HeadKind::mlp}, {"linear", HeadKind::linear}}};
};
template <>
struct EnumNames<OptimName> {
  static constexpr std::array<std::pair<std::string_view, OptimName>, 3> values{
      {{"adam", OptimName::adam}, {"adamw", OptimName::adamw}, {"sgd", OptimName::sgd}}};
};
template <>
struct EnumNames<DatasetName> {
  static constexpr std::array<std::pair<std::string_view, DatasetName>, 5> values{
      {{"mnist", DatasetName::mnist}, {"fashion-mnist", DatasetName::fashion_mnist}, {"cifar10", DatasetName::cifar10},
       {"cifar100", DatasetName::cifar100}, {"tinyimagenet", DatasetName::tinyimagenet}}};
};
template <>
struct EnumNames<FeatureSource> {
  static constexpr std::array<std::pair<std::string_view, FeatureSource>, 2> values{
      {{"resnet34", FeatureSource::resnet34}, {"file", FeatureSource::file}}};
};
template <>
struct EnumNames<LmSamplingName> {
  static constexpr std::array<std::pair<std::string_view, LmSamplingName>, 2> values{
      {{"packed", LmSamplingName::packed}, {"per_document", LmSamplingName::per_document}}};
};
template <>
struct EnumNames<ScheduleName> {
  static constexpr std::array<std::pair<std::string_view, ScheduleName>, 3> values{
      {{"cosine", ScheduleName::cosine}, {"multistep", ScheduleName::multistep}, {"constant", ScheduleName::constant}}};
};

struct TaskConfig {
  std::string kind;
  TaskName name{};
  int length = 0;
  int vocab = 0;
  int train_size = 0;
  int val_size = 0;
  int test_size = 0;
  int data_seed = 0;
  bool operator==(const TaskConfig&) const = default;
  static const Schema<TaskConfig>& schema();
};

// Image data of the vision and anomaly tasks (unused by the synthetic ones).
struct DataConfig {
  std::string root;        // folder holding each dataset's files under their standard names
  DatasetName dataset{};
  int holdout = 0;         // training examples held out for validation
  int train_limit = 0;     // use at most this many training examples; 0 = all
  int test_limit = 0;      // evaluate on at most this many test examples; 0 = all
  int crop_padding = 0;    // random-crop augmentation after zero padding; 0 = off
  bool flip = false;       // random horizontal flips
  int workers = 2;         // loader threads decoding and augmenting ahead of the training step
  // Set anomaly detection: sets of set_size images, all but one of one class.
  FeatureSource features{};
  std::string resnet_weights;   // torchvision resnet34 weights (safetensors); empty = random init
  std::string features_file;    // precomputed features (safetensors: features [N, F], labels [N])
  int set_size = 10;
  int train_sets = 0, val_sets = 0, test_sets = 0;
  bool operator==(const DataConfig&) const = default;
  static const Schema<DataConfig>& schema();
};

// Token data of the language-model task (kind lm).
struct LmDataConfig {
  std::vector<std::string> text;   // text / JSONL files (plain, .gz, .zst) under data.root, tokenized on first use
  std::string tokens;              // or a folder from `qkvlab data prepare` (absolute or under data.root)
  std::string tokenizer;           // GPT-2 encoder.json + vocab.bpe (absolute or under data.root)
  double val_fraction = 0;         // the last fraction of the token stream is the validation split
  LmSamplingName sampling{};       // packed windows, or one document per sample (the official code)
  bool loss_on_padding = false;    // per_document: count the end-of-text padding in the loss (official code)
  bool operator==(const LmDataConfig&) const = default;
  static const Schema<LmDataConfig>& schema();
};

struct ModelConfig {
  std::string kind;
  int patch = 0;
  int vocab = 0;     // gpt: output vocabulary (GPT-2's 50257 padded)
  int context = 0;   // gpt: positions (the training sequence length)
  int d_model = 0;
  int layers = 0;
  int heads = 0;
  int kv_heads = 0;  // 0 = heads
  double ffn_mult = 0;
  Activation activation{};
  Norm norm{};
  double dropout = 0;
  int pos2d_channels = 0;
  HeadKind head{};
  std::string sharing;  // "QKV", "Q=K-V", "Q-K=V" or "Q=K=V"
  bool pos2d = false;
  bool operator==(const ModelConfig&) const = default;
  static const Schema<ModelConfig>& schema();
};

struct OptimConfig {
  OptimName name{};
  double lr = 0, beta1 = 0, beta2 = 0, eps = 0, weight_decay = 0, momentum = 0, clip = 0;
  bool operator==(const OptimConfig&) const = default;
  static const Schema<OptimConfig>& schema();
};

struct ScheduleConfig {
  ScheduleName name{};
  double warmup = 0;  // fraction of the total steps
  int warmup_steps = 0;  // lm: warmup in steps; overrides the fraction when > 0
  double min_lr = 0;
  std::vector<int> milestones;  // epochs
  double gamma = 0;
  bool operator==(const ScheduleConfig&) const = default;
  static const Schema<ScheduleConfig>& schema();
};

struct TrainConfig {
  int epochs = 0;
  int steps = 0;            // lm: optimizer steps
  int grad_accum = 0;       // lm: micro-batches per optimizer step
  int eval_every = 0;       // lm: steps between validations (and checkpoints)
  int eval_batches = 0;     // lm: validation batches
  int keep_checkpoints = 0; // lm: newest checkpoints kept
  double skip_grad_norm = 0;  // lm: skip a step whose gradient norm exceeds this; 0 = never
  double peak_tflops = 0;   // lm: the device's peak for MFU; 0 = measure a float32 GEMM
  int batch_size = 0;
  std::string device;
  int threads = 0;  // 0 = all cores
  int log_every = 0;
  int eval_batch_size = 0;
  int seed = 0;
  bool operator==(const TrainConfig&) const = default;
  static const Schema<TrainConfig>& schema();
};

// One swept key and its values (nodes, checked against the key's type, sources kept).
struct GridAxis {
  std::string key;  // dotted schema key: "model.d_model"
  std::vector<Node> values;
  bool operator==(const GridAxis&) const = default;
};
using Grid = std::vector<GridAxis>;

struct SweepConfig {
  Grid grid;
  std::vector<Variant> variants;
  std::vector<int> seeds;
  bool operator==(const SweepConfig&) const = default;
  static const Schema<SweepConfig>& schema();
};

struct Config {
  std::string name;
  TaskConfig task;
  DataConfig data;
  LmDataConfig lm;
  ModelConfig model;
  OptimConfig optim;
  ScheduleConfig schedule;
  TrainConfig train;
  SweepConfig sweep;
  bool operator==(const Config&) const = default;
  static const Schema<Config>& schema();
};

template <>
struct Codec<Variant> {
  static std::string type();
  static bool parse(const Node& n, Variant& out, const std::string& key);
  static Node emit(const Variant& v);
};

template <>
struct Codec<Grid> {
  static std::string type();
  static bool parse(const Node& n, Grid& out, const std::string& key);  // throws for a bad key or value
  static Node emit(const Grid& g);
};

// Strict parse of a whole tree (no `scales`): unknown keys, bad values and missing required keys
// throw ConfigError naming file, line, dotted key, value and the expected form.
Config parse_config(const Node& tree);
Config config_from_yaml(const std::string& text, const std::string& origin = "<string>");
Node config_to_tree(const Config& config);
// Every key with its value, in schema order; config_from_yaml reads it back equal.
std::string to_yaml(const Config& config);

// Every key of the schema (sections and leaves) and a lookup by dotted key.
const std::vector<KeyInfo>& config_keys();
const KeyInfo* find_config_key(std::string_view dotted);
// One line per key: key, type, default, doc.
std::string describe_schema();

}  // namespace qkv::experiment
