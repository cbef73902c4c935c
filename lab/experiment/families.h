// The four task families of the study, each a struct of the sections it accepts, parsed from an
// experiment file whose task.kind selects it:
//
//   synthetic  task (the sequence task), model (encoder), optim, schedule (epochs), train (epochs)
//   vision     task, data (image dataset), model (vit), optim, schedule (epochs), train (epochs)
//   anomaly    task, data (image dataset, sets, features), model (set_transformer), optim,
//              schedule (epochs), train (epochs)
//   lm         task, data (root), lm (token data), model (gpt), optim (adamw), schedule (steps),
//              train (steps)
//
// A key of another family is refused with the family it belongs to (config.h).
#pragma once
#include "lab/experiment/sections.h"
#include "train/data/synthetic.h"

namespace qkv::experiment {

enum class TaskKind { synthetic, vision, anomaly, lm };
enum class Activation { relu, gelu, gelu_tanh };  // gelu_tanh: GPT-2's gelu_new
enum class Norm { post, pre };
enum class HeadKind { mlp, linear };
enum class DatasetName { mnist, fashion_mnist, cifar10, cifar100, tinyimagenet };
enum class FeatureSource { resnet34, file };
enum class LmSamplingName { packed, per_document, official };
// How a QKV (or GQA) checkpoint becomes its K=V form (lab/infer/convert.h).
enum class ConvertMethod { copy_k, average, svd };
// The rotary frequency scalings of a Llama-style model (nn/rope.h).
enum class RopeScalingName { none, linear, llama3 };

template <> struct EnumNames<TaskKind> {
  static constexpr std::array<std::pair<std::string_view, TaskKind>, 4> values{{{"synthetic", TaskKind::synthetic},
                                                                                {"vision", TaskKind::vision},
                                                                                {"anomaly", TaskKind::anomaly},
                                                                                {"lm", TaskKind::lm}}};
};
// task.name is the data layer's task itself, read here: its one parser.
template <> struct EnumNames<data::SyntheticTask> {
  using T = data::SyntheticTask;
  static constexpr std::array<std::pair<std::string_view, T>, 5> values{
      {{"reverse", T::reverse}, {"sort", T::sort}, {"sub", T::sub}, {"swap", T::swap}, {"copy", T::copy}}};
};
template <> struct EnumNames<Activation> {
  static constexpr std::array<std::pair<std::string_view, Activation>, 3> values{
      {{"relu", Activation::relu}, {"gelu", Activation::gelu}, {"gelu_tanh", Activation::gelu_tanh}}};
};
template <> struct EnumNames<Norm> {
  static constexpr std::array<std::pair<std::string_view, Norm>, 2> values{{{"post", Norm::post}, {"pre", Norm::pre}}};
};
template <> struct EnumNames<HeadKind> {
  static constexpr std::array<std::pair<std::string_view, HeadKind>, 2> values{
      {{"mlp", HeadKind::mlp}, {"linear", HeadKind::linear}}};
};
template <> struct EnumNames<DatasetName> {
  static constexpr std::array<std::pair<std::string_view, DatasetName>, 5> values{
      {{"mnist", DatasetName::mnist},
       {"fashion-mnist", DatasetName::fashion_mnist},
       {"cifar10", DatasetName::cifar10},
       {"cifar100", DatasetName::cifar100},
       {"tinyimagenet", DatasetName::tinyimagenet}}};
};
template <> struct EnumNames<FeatureSource> {
  static constexpr std::array<std::pair<std::string_view, FeatureSource>, 2> values{
      {{"resnet34", FeatureSource::resnet34}, {"file", FeatureSource::file}}};
};
template <> struct EnumNames<LmSamplingName> {
  static constexpr std::array<std::pair<std::string_view, LmSamplingName>, 3> values{
      {{"packed", LmSamplingName::packed},
       {"per_document", LmSamplingName::per_document},
       {"official", LmSamplingName::official}}};
};
template <> struct EnumNames<RopeScalingName> {
  static constexpr std::array<std::pair<std::string_view, RopeScalingName>, 3> values{
      {{"none", RopeScalingName::none}, {"linear", RopeScalingName::linear}, {"llama3", RopeScalingName::llama3}}};
};
template <> struct EnumNames<ConvertMethod> {
  static constexpr std::array<std::pair<std::string_view, ConvertMethod>, 3> values{
      {{"copy-k", ConvertMethod::copy_k}, {"average", ConvertMethod::average}, {"svd", ConvertMethod::svd}}};
};

// ---- task sections ------------------------------------------------------------------------

// task.kind alone (language models); the other task sections add to it.
struct TaskBase {
  TaskKind kind{};
  bool operator==(const TaskBase&) const = default;
};
struct SyntheticTask : TaskBase {
  data::SyntheticTask name{};
  int length = 0;
  int vocab = 0;
  int train_size = 0, val_size = 0, test_size = 0;
  int data_seed = 0;
  bool operator==(const SyntheticTask&) const = default;
  static const Schema<SyntheticTask>& schema();
};
// Vision and anomaly: the seed of the validation split (and of the anomaly sets).
struct SeededTask : TaskBase {
  int data_seed = 0;
  bool operator==(const SeededTask&) const = default;
  static const Schema<SeededTask>& schema();  // data_seed; the families add task.kind
};
struct VisionTask : SeededTask {
  bool operator==(const VisionTask&) const = default;
  static const Schema<VisionTask>& schema();
};
struct AnomalyTask : SeededTask {
  bool operator==(const AnomalyTask&) const = default;
  static const Schema<AnomalyTask>& schema();
};
struct LmTask : TaskBase {
  bool operator==(const LmTask&) const = default;
  static const Schema<LmTask>& schema();
};

// ---- data sections ------------------------------------------------------------------------

// data.root: the folder holding each dataset's files under their standard names.
struct DataRoot {
  std::string root;
  bool operator==(const DataRoot&) const = default;
  static const Schema<DataRoot>& schema();
};
// An image dataset under the root, with a validation split held out of its training set.
struct ImageData : DataRoot {
  DatasetName dataset{};
  int holdout = 0;
  int image_size = 0;  // resized (bilinear) to image_size x image_size; 0 = the dataset's size
  bool operator==(const ImageData&) const = default;
  static const Schema<ImageData>& schema();
};
// Vision: the dataset through the threaded loader, with augmentation.
struct VisionData : ImageData {
  int train_limit = 0;   // use at most this many training examples; 0 = all
  int test_limit = 0;    // evaluate on at most this many test examples; 0 = all
  int crop_padding = 0;  // random-crop augmentation after zero padding; 0 = off
  bool flip = false;     // random horizontal flips
  int workers = 2;       // loader threads decoding and augmenting ahead of the training step
  int pad_to = 0;        // zero-padded at the right and bottom to pad_to x pad_to; 0 = off
  bool operator==(const VisionData&) const = default;
  static const Schema<VisionData>& schema();
};
// Anomaly: sets of set_size feature vectors, all but one of one class.
struct AnomalyData : ImageData {
  FeatureSource features{};
  std::string resnet_weights;  // torchvision resnet34 weights (safetensors); empty = random init
  std::string features_file;   // precomputed features (safetensors: <split>.features [N, F], .labels [N])
  int set_size = 10;
  int train_sets = 0, val_sets = 0, test_sets = 0;
  bool resample = false;     // new training sets every epoch, else one draw for the whole run
  bool standardize = false;  // each feature standardised with the training statistics
  bool operator==(const AnomalyData&) const = default;
  static const Schema<AnomalyData>& schema();
};
// Language models: token data, tokenized from text under data.root or prepared beforehand.
struct LmData {
  std::vector<std::string> text;      // text / JSONL files (plain, .gz, .zst) under data.root
  std::vector<std::string> val_text;  // the validation split's files, apart from `text`
  std::string tokens;                 // or a folder from `qkvlab data prepare` (absolute or under data.root)
  std::string tokenizer;              // GPT-2's tokenizer files (tokenizer_files.h), absolute or under data.root
  double val_fraction = 0;            // without val_text: the last fraction of the token stream validates
  LmSamplingName sampling{};          // packed windows, one padded document per sample, or the official code's
  bool loss_on_padding = false;       // per_document: count the end-of-text padding in the loss
  bool operator==(const LmData&) const = default;
  static const Schema<LmData>& schema();
};

// ---- model sections -----------------------------------------------------------------------

// The transformer settings every model has. The attention's projection sharing, KV heads and
// 2D scores come from the run's variant (sweep.variants), not from keys.
struct ModelBase {
  std::string kind;
  int d_model = 0;
  int layers = 0;
  int heads = 0;
  double ffn_mult = 0;
  double dropout = 0;
  bool operator==(const ModelBase&) const = default;
  static const Schema<ModelBase>& schema();
};
struct EncoderModel : ModelBase {
  Activation activation{};
  Norm norm{};
  int pos2d_channels = 0;
  HeadKind head{};
  bool operator==(const EncoderModel&) const = default;
  static const Schema<EncoderModel>& schema();
};
struct VitModel : ModelBase {
  int patch = 0;
  bool pad_to_patch = false;  // zero-pad the images up to the next multiple of the patch
  Activation activation{};
  int pos2d_channels = 0;
  bool operator==(const VitModel&) const = default;
  static const Schema<VitModel>& schema();
};
struct SetModel : ModelBase {
  Activation activation{};
  double input_dropout = 0;  // on the element features, before the embedding
  int pos2d_channels = 0;
  bool operator==(const SetModel&) const = default;
  static const Schema<SetModel>& schema();
};
// model.kind gpt (the study's GPT-2 block) or llama (RMS norms, rotary positions, SwiGLU MLP,
// nn::llama_block); the rope_*, norm and bias keys are llama's.
struct GptModel : ModelBase {
  Activation activation{};  // the MLP's: exact GELU (the official code), or GPT-2's tanh form
  int vocab = 0;            // output vocabulary (GPT-2's 50257 padded)
  int context = 0;          // positions = the training sequence length
  std::string init_from;    // start from these weights: a run folder (its newest checkpoint) or a .safetensors file
  int head_dim = 0;         // 0: d_model / heads
  double rope_theta = 10000;
  RopeScalingName rope_scaling{};
  double rope_factor = 1, rope_low_freq_factor = 1, rope_high_freq_factor = 4;
  int rope_original_context = 8192;
  double rotary_fraction = 1;
  double rms_norm_eps = 0;  // 0: 1e-6
  bool attention_bias = false, mlp_bias = false, tie_embeddings = true;
  bool llama() const { return kind == "llama"; }
  bool operator==(const GptModel&) const = default;
  static const Schema<GptModel>& schema();
};

// ---- the families -------------------------------------------------------------------------

struct SyntheticConfig {
  static constexpr TaskKind kKind = TaskKind::synthetic;
  std::string name;
  SyntheticTask task;
  EncoderModel model;
  OptimConfig optim;
  EpochSchedule schedule;
  EpochTrain train;
  SweepConfig sweep;
  bool operator==(const SyntheticConfig&) const = default;
  static const Schema<SyntheticConfig>& schema();
};

struct VisionConfig {
  static constexpr TaskKind kKind = TaskKind::vision;
  std::string name;
  VisionTask task;
  VisionData data;
  VitModel model;
  OptimConfig optim;
  EpochSchedule schedule;
  EpochTrain train;
  SweepConfig sweep;
  bool operator==(const VisionConfig&) const = default;
  static const Schema<VisionConfig>& schema();
};

// The side of a dataset's images in its standard format (MNIST 28, CIFAR 32, TinyImageNet 64).
int64_t native_image_side(DatasetName d);
int64_t native_image_channels(DatasetName d);  // 1 for the MNISTs, 3 for the rest
int64_t dataset_classes(DatasetName d);        // 10, 100 or 200
// What the ViT of a vision config sees of images stored height x width: resized to
// data.image_size, then zero-padded at the right and bottom to data.pad_to and, with
// model.pad_to_patch, to the next multiple of model.patch.
struct ImageGeometry {
  int64_t height = 0, width = 0;                // after resizing
  int64_t padded_height = 0, padded_width = 0;  // the ViT's input
};
// A data.pad_to below the image size, or a model.patch that does not divide the padded size,
// fails through `at` (a config being parsed) or as a ValueError naming the key (at == nullptr).
ImageGeometry vision_geometry(const VisionConfig& c, int64_t height, int64_t width, const Located* at = nullptr);

struct AnomalyConfig {
  static constexpr TaskKind kKind = TaskKind::anomaly;
  std::string name;
  AnomalyTask task;
  AnomalyData data;
  SetModel model;
  OptimConfig optim;
  EpochSchedule schedule;
  EpochTrain train;
  SweepConfig sweep;
  bool operator==(const AnomalyConfig&) const = default;
  static const Schema<AnomalyConfig>& schema();
};

// The conversion study (`qkvlab convert-study`): the experiment's one run is the source (QKV or
// GQA-g), converted to its K=V form by each method, then fine-tuned; a K=V model trained from
// scratch on the same total tokens is the reference. `qkvlab run` does not read this section.
struct ConvertStudy {
  std::vector<ConvertMethod> methods;
  int calibration_batches = 0;  // training batches whose ln1 outputs the data-aware fit reads
  int finetune_steps = 0;
  double finetune_lr = 0;  // the fine-tune's peak learning rate (cosine to schedule.min_lr)
  int finetune_warmup_steps = 0;
  int finetune_eval_every = 0;
  bool operator==(const ConvertStudy&) const = default;
  static const Schema<ConvertStudy>& schema();
};

struct LmConfig {
  static constexpr TaskKind kKind = TaskKind::lm;
  std::string name;
  LmTask task;
  DataRoot data;
  LmData lm;
  GptModel model;
  LmOptim optim;
  StepSchedule schedule;
  StepTrain train;
  SweepConfig sweep;
  ConvertStudy convert;
  bool operator==(const LmConfig&) const = default;
  static const Schema<LmConfig>& schema();
};

}  // namespace qkv::experiment
