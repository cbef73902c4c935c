// The family sections' keys (name, member, default, rule, doc), the rules that span several
// keys, and each family's list of sections.
#include "lab/experiment/families.h"

#include <unistd.h>

#include <algorithm>

namespace qkv::experiment {

namespace {

Rule<std::string> path_component() {
  return {"(non-empty, no '/', not '.' or '..')",
          [](std::string& s) { return !s.empty() && s != "." && s != ".." && s.find('/') == std::string::npos; }};
}

// task.kind: it chose the family whose schema is being parsed (config.cpp), so it is that one.
template <class T> FieldDef<T> kind_field(TaskKind kind) {
  return field<T, TaskKind>("kind", &T::kind, kind, "task family; it decides which keys the file takes");
}

// model.kind: the one architecture of the family.
template <class T> FieldDef<T> model_kind_field(const char* kind, const char* family) {
  return field<T, std::string>("kind", &T::kind, kind,
                               Rule<std::string>{cat("('", kind, "' for task.kind ", family, ")"),
                                                 [kind](std::string& s) { return s == kind; }},
                               "architecture (one per task family)");
}

// The cross-section rules every family has.
template <class F> void check_lr_floor(const F& c, const Located& at) {
  if (c.schedule.min_lr > c.optim.lr)
    at.fail("schedule.min_lr", format_number(c.schedule.min_lr),
            cat("a number <= optim.lr = ", format_number(c.optim.lr)));
}

}  // namespace

// ---- task sections ------------------------------------------------------------------------

const Schema<SyntheticTask>& SyntheticTask::schema() {
  using T = SyntheticTask;
  static const Schema<T> s{
      {
          kind_field<T>(TaskKind::synthetic),
          field("name", &T::name, data::SyntheticTask::reverse, "which synthetic task (paper Table 1)"),
          field("length", &T::length, 16, in_range(2, 1 << 16), "sequence length n (swap needs it even)"),
          field("vocab", &T::vocab, 10, in_range(2, 1 << 20), "tokens are drawn uniformly from 0..vocab-1"),
          field("train_size", &T::train_size, 50000, in_range(1, 1 << 28), "training examples"),
          field("val_size", &T::val_size, 1000, in_range(1, 1 << 28), "validation examples (best checkpoint)"),
          field("test_size", &T::test_size, 10000, in_range(1, 1 << 28), "test examples (reported accuracy)"),
          field("data_seed", &T::data_seed, 0, at_least(0), "seed of the generated data sets"),
      },
      [](const T& t, const Located& at) {
        if (t.name == data::SyntheticTask::swap && t.length % 2 != 0)
          at.fail("length", t.length, "an even integer (swap exchanges the two halves)");
      }};
  return s;
}

const Schema<SeededTask>& SeededTask::schema() {
  using T = SeededTask;
  static const Schema<T> s{{
      field("data_seed", &T::data_seed, 0, at_least(0), "seed of the validation split (and of the anomaly sets)"),
  }};
  return s;
}

const Schema<VisionTask>& VisionTask::schema() {
  using T = VisionTask;
  static const Schema<T> s{fields<T>({kind_field<T>(TaskKind::vision)}, inherit<T>(SeededTask::schema()))};
  return s;
}

const Schema<AnomalyTask>& AnomalyTask::schema() {
  using T = AnomalyTask;
  static const Schema<T> s{fields<T>({kind_field<T>(TaskKind::anomaly)}, inherit<T>(SeededTask::schema()))};
  return s;
}

const Schema<LmTask>& LmTask::schema() {
  static const Schema<LmTask> s{{kind_field<LmTask>(TaskKind::lm)}};
  return s;
}

// ---- data sections ------------------------------------------------------------------------

const Schema<DataRoot>& DataRoot::schema() {
  static const Schema<DataRoot> s{{
      field("root", &DataRoot::root, "data", "folder with the datasets' files (overridable: data.root=PATH)"),
  }};
  return s;
}

const Schema<ImageData>& ImageData::schema() {
  using T = ImageData;
  static const Schema<T> s{
      fields(inherit<T>(DataRoot::schema()),
             {
                 field("dataset", &T::dataset, DatasetName::mnist, "image dataset"),
                 field("holdout", &T::holdout, 5000, in_range(1, 1 << 28),
                       "training examples held out for validation (vision: train.protocol holdout_best only)"),
                 field("image_size", &T::image_size, 0, in_range(0, 4096),
                       "images resized (bilinear) to this square size before use; 0 = the dataset's own"),
             })};
  return s;
}

const Schema<VisionData>& VisionData::schema() {
  using T = VisionData;
  static const Schema<T> s{fields(
      inherit<T>(ImageData::schema()),
      {
          field("train_limit", &T::train_limit, 0, at_least(0), "use at most this many training examples; 0 = all"),
          field("test_limit", &T::test_limit, 0, at_least(0), "test on at most this many examples; 0 = all"),
          field("crop_padding", &T::crop_padding, 0, in_range(0, 1024),
                "random crop after zero padding (augmentation); 0 = off"),
          field("flip", &T::flip, false, "random horizontal flips (augmentation)"),
          field("workers", &T::workers, 2, in_range(0, 256), "loader threads ahead of the training step; 0 = inline"),
          field("pad_to", &T::pad_to, 0, in_range(0, 4096),
                "zero-pad the images (after resizing, cropping and normalisation) at the right and bottom to "
                "pad_to x pad_to; 0 = off"),
      })};
  return s;
}

const Schema<AnomalyData>& AnomalyData::schema() {
  using T = AnomalyData;
  static const Schema<T> s{fields(inherit<T>(ImageData::schema()),
                                  {
                                      field("features", &T::features, FeatureSource::resnet34,
                                            "element features: a frozen ResNet34, or a file"),
                                      field("resnet_weights", &T::resnet_weights, "",
                                            "torchvision resnet34 weights (safetensors); empty = random init"),
                                      field("features_file", &T::features_file, "",
                                            "features: train.features [N, F], train.labels [N], test.* (safetensors)"),
                                      field("set_size", &T::set_size, 10, in_range(3, 1 << 16),
                                            "images per set (one is the odd one out)"),
                                      field("train_sets", &T::train_sets, 20000, in_range(1, 1 << 26), "training sets"),
                                      field("val_sets", &T::val_sets, 1000, in_range(1, 1 << 26), "validation sets"),
                                      field("test_sets", &T::test_sets, 2000, in_range(1, 1 << 26), "test sets"),
                                      field("resample", &T::resample, false,
                                            "draw new training sets every epoch (from the same images); false = "
                                            "one draw for the whole run"),
                                      field("standardize", &T::standardize, false,
                                            "standardise each feature with the training images' mean and std"),
                                  }),
                           [](const T& d, const Located& at) {
                             if (d.features == FeatureSource::file && d.features_file.empty())
                               at.fail("features_file", "\"\"", "a safetensors path when data.features is file");
                           }};
  return s;
}

const Schema<LmData>& LmData::schema() {
  using T = LmData;
  static const Schema<T> s{
      {
          field("text", &T::text, {},
                "text or JSONL files (plain, .gz, .zst) under data.root, tokenized once and cached"),
          field("val_text", &T::val_text, {},
                "lm.text: validation files, the whole validation split (no fraction cut); [] = cut lm.text"),
          field("tokens", &T::tokens, "",
                "or a folder made by `qkvlab data prepare` (absolute or under data.root); neither: no data of its "
                "own (an imported model: `qkvlab run` refuses it, other commands take --token-data)"),
          field("tokenizer", &T::tokenizer, "gpt2-tokenizer",
                "GPT-2's encoder.json + vocab.bpe, or Hugging Face's vocab.json + merges.txt or tokenizer.json "
                "(absolute or under data.root)"),
          field("val_fraction", &T::val_fraction, 0.1, in_half_open(0.0, 1.0),
                "lm.text without lm.val_text: the last fraction of tokens validates"),
          field("sampling", &T::sampling, LmSamplingName::packed,
                "packed windows; per_document: one document per sample, padded, padding masked; official: "
                "per_document exactly as the official code (no leading separator, context-1 targets, padding "
                "counted)"),
          field("loss_on_padding", &T::loss_on_padding, false,
                "per_document: the loss counts the end-of-text padding (official always does)"),
      },
      [](const T& l, const Located& at) {
        if (!l.text.empty() && !l.tokens.empty())
          at.fail("tokens", l.tokens, "empty when lm.text lists files (give one source of tokens)");
        if (!l.val_text.empty() && l.text.empty())
          at.fail("val_text", cat("[", l.val_text.front(), ", ...]"),
                  "[] with lm.tokens (a prepared folder has its own val split), or lm.text beside it");
      }};
  return s;
}

// ---- model sections -----------------------------------------------------------------------

namespace {

// Attention (at most four d x d projections) and the MLP of every layer: a bound on the
// parameters that grow with the depth and width.
double body_parameters(const ModelBase& m) {
  const double d = m.d_model;
  return double(m.layers) * (4 * d * d + 2 * d * d * m.ffn_mult);
}

// Training holds each parameter four times (weights, gradients, two Adam moments) in float32. A
// size that cannot fit in this machine's memory is refused here, naming the key, rather than
// found by the kernel's out-of-memory killer halfway through building the model.
void check_fits_memory(double parameters, const Located& at, const char* key, int value) {
  const double need = parameters * 4 * sizeof(float);
  const double have = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGE_SIZE));
  if (have > 0 && need > have)
    at.fail(key, value,
            cat("a model that fits in memory: about ", int64_t(parameters / 1e6), "M parameters need ",
                int64_t(need / double(1 << 30)), " GiB to train, and this machine has ",
                int64_t(have / double(1 << 30)), " GiB"));
}

}  // namespace

// The base model's checks; heads must divide d_model unless the head dim is given.
void check_base(const ModelBase& m, const Located& at, int head_dim) {
  if (head_dim == 0 && m.d_model % m.heads != 0)
    at.fail("heads", m.heads, cat("an integer that divides model.d_model = ", m.d_model));
  if (m.ffn_mult > 1024) at.fail("ffn_mult", m.ffn_mult, "a value in (0, 1024]");
  check_fits_memory(body_parameters(m), at, "layers", m.layers);
}

const Schema<ModelBase>& ModelBase::schema() {
  using T = ModelBase;
  static const Schema<T> s{{
                               field("d_model", &T::d_model, 64, in_range(1, 1 << 16), "model width"),
                               field("layers", &T::layers, 2, in_range(1, 10000), "transformer layers"),
                               field("heads", &T::heads, 4, in_range(1, 4096), "query heads (must divide d_model)"),
                               field("ffn_mult", &T::ffn_mult, 2.0, greater_than(0.0),
                                     "MLP width = ffn_mult * d_model"),
                               field("dropout", &T::dropout, 0.1, in_half_open(0.0, 1.0), "dropout probability"),
                           },
                           [](const T& m, const Located& at) { check_base(m, at, 0); }};
  return s;
}

namespace {
template <class T> void check_model_base(const T& m, const Located& at) { ModelBase::schema().check(m, at); }

// The check of the models with the (+) variants' 2D positional scores: the base model's, and an
// even channel count (nn::pos2d_table gives half the channels to the row, half to the column).
template <class T> void check_pos2d_model(const T& m, const Located& at) {
  check_model_base(m, at);
  if (m.pos2d_channels % 2 != 0) at.fail("pos2d_channels", m.pos2d_channels, "an even integer >= 2");
}
}  // namespace

const Schema<EncoderModel>& EncoderModel::schema() {
  using T = EncoderModel;
  static const Schema<T> s{
      fields(fields<T>({model_kind_field<T>("encoder", "synthetic")}, inherit<T>(ModelBase::schema())),
             {
                 field("activation", &T::activation, Activation::relu, "MLP activation"),
                 field("norm", &T::norm, Norm::post, "post-LN (the paper's synthetic runs) or pre-LN"),
                 field("pos2d_channels", &T::pos2d_channels, 10, in_range(2, 4096),
                       "channels m of the (+) variants' 2D positional scores (even)"),
                 field("head", &T::head, HeadKind::mlp, "output head; mlp = Linear-LayerNorm-ReLU-Dropout-Linear"),
             }),
      check_pos2d_model<T>};
  return s;
}

const Schema<VitModel>& VitModel::schema() {
  using T = VitModel;
  static const Schema<T> s{
      fields(fields<T>({model_kind_field<T>("vit", "vision"),
                        field("patch", &T::patch, 7, in_range(1, 4096),
                              "patch size (must divide the image size after resizing and padding)"),
                        field("pad_to_patch", &T::pad_to_patch, false,
                              "zero-pad the images at the right and bottom up to the next multiple of the patch")},
                       inherit<T>(ModelBase::schema())),
             {
                 field("activation", &T::activation, Activation::relu, "MLP activation"),
                 field("pos2d_channels", &T::pos2d_channels, 10, in_range(2, 4096),
                       "channels m of the (+) variants' 2D positional scores over the patches (even)"),
             }),
      check_pos2d_model<T>};
  return s;
}

const Schema<SetModel>& SetModel::schema() {
  using T = SetModel;
  static const Schema<T> s{fields(fields<T>({model_kind_field<T>("set_transformer", "anomaly")},
                                            inherit<T>(ModelBase::schema())),
                                  {
                                      field("activation", &T::activation, Activation::relu, "MLP activation"),
                                      field("input_dropout", &T::input_dropout, 0.0, in_half_open(0.0, 1.0),
                                            "dropout on the element features before the embedding"),
                                      field("pos2d_channels", &T::pos2d_channels, 10, in_range(2, 4096),
                                            "channels m of the (+) variants' 2D positional scores over the set (even)"),
                                  }),
                           check_pos2d_model<T>};
  return s;
}

namespace {
// A key of model.kind llama given to a gpt model (left at its default otherwise).
void check_llama_keys(const GptModel& m, const Located& at) {
  const GptModel d;
  const std::pair<const char*, bool> given[] = {
      {"head_dim", m.head_dim != d.head_dim},
      {"rope_theta", m.rope_theta != d.rope_theta},
      {"rope_scaling", m.rope_scaling != d.rope_scaling},
      {"rope_factor", m.rope_factor != d.rope_factor},
      {"rope_low_freq_factor", m.rope_low_freq_factor != d.rope_low_freq_factor},
      {"rope_high_freq_factor", m.rope_high_freq_factor != d.rope_high_freq_factor},
      {"rope_original_context", m.rope_original_context != d.rope_original_context},
      {"rotary_fraction", m.rotary_fraction != d.rotary_fraction},
      {"rms_norm_eps", m.rms_norm_eps != d.rms_norm_eps},
      {"attention_bias", m.attention_bias != d.attention_bias},
      {"mlp_bias", m.mlp_bias != d.mlp_bias},
      {"tie_embeddings", m.tie_embeddings != d.tie_embeddings}};
  if (!m.llama()) {
    for (const auto& [key, set] : given)
      if (set) at.fail(key, "given", "left out: the key is for model.kind llama (this model is gpt)");
    return;
  }
  if (m.activation != Activation::gelu)
    at.fail("activation", enum_name(m.activation),
            "left out: a llama MLP is SwiGLU (its silu gate); the key is for model.kind gpt");
  if (m.rotary_fraction > 1) at.fail("rotary_fraction", m.rotary_fraction, "a fraction in (0, 1]");
  if (m.rope_scaling == RopeScalingName::llama3 && !(m.rope_high_freq_factor > m.rope_low_freq_factor))
    at.fail("rope_high_freq_factor", m.rope_high_freq_factor,
            cat("more than model.rope_low_freq_factor = ", m.rope_low_freq_factor));
}
}  // namespace

const Schema<GptModel>& GptModel::schema() {
  using T = GptModel;
  static const Schema<T> s{
      fields<T>({field<T, std::string>("kind", &T::kind, "gpt",
                                       Rule<std::string>{"('gpt' or 'llama' for task.kind lm)",
                                                         [](std::string& s) { return s == "gpt" || s == "llama"; }},
                                       "the decoder: gpt (the study's GPT-2 block) or llama (RMS norms, rotary "
                                       "positions, a SwiGLU MLP: today's decoder, nn/models/gpt.h)"),
                 field("activation", &T::activation, Activation::gelu,
                       "MLP activation: gelu (exact, the official code), gelu_tanh (GPT-2's gelu_new), relu"),
                 field("vocab", &T::vocab, 50304, in_range(2, 1 << 24),
                       "output vocabulary (GPT-2's 50257 padded to 50304)"),
                 field("context", &T::context, 1024, in_range(2, 1 << 20), "positions = training sequence length"),
                 field("init_from", &T::init_from, "",
                       "start from these weights instead of N(0, 0.02): a run folder (its newest checkpoint, e.g. "
                       "one `qkvlab convert` wrote) or a .safetensors file, relative to the working directory; "
                       "empty = random init"),
                 field("head_dim", &T::head_dim, 0, in_range(0, 4096), "llama: the head dim; 0 = d_model / heads"),
                 field("rope_theta", &T::rope_theta, 10000.0, greater_than(0.0), "llama: the rotary base theta"),
                 field("rope_scaling", &T::rope_scaling, RopeScalingName::none,
                       "llama: the rotary frequencies' scaling: none, linear or llama3 (transformers' rope_type)"),
                 field("rope_factor", &T::rope_factor, 1.0, at_least(1.0), "llama: the linear or llama3 factor"),
                 field("rope_low_freq_factor", &T::rope_low_freq_factor, 1.0, greater_than(0.0),
                       "llama: llama3 scaling's low_freq_factor"),
                 field("rope_high_freq_factor", &T::rope_high_freq_factor, 4.0, greater_than(0.0),
                       "llama: llama3 scaling's high_freq_factor"),
                 field("rope_original_context", &T::rope_original_context, 8192, in_range(1, 1 << 24),
                       "llama: llama3 scaling's original_max_position_embeddings"),
                 field("rotary_fraction", &T::rotary_fraction, 1.0, greater_than(0.0),
                       "llama: the share of each head turned (partial_rotary_factor)"),
                 field("rms_norm_eps", &T::rms_norm_eps, 0.0, at_least(0.0),
                       "llama: the RMS norms' eps; 0 = 1e-6 (a gpt's layer norms take 1e-5)"),
                 field("attention_bias", &T::attention_bias, false, "llama: biases on the attention's projections"),
                 field("mlp_bias", &T::mlp_bias, false, "llama: biases on the MLP's projections"),
                 field("tie_embeddings", &T::tie_embeddings, true,
                       "llama: the output layer is the token embedding (false: a matrix of its own)")},
                inherit<T>(ModelBase::schema())),
      [](const T& m, const Located& at) {
        check_base(m, at, m.head_dim);
        check_llama_keys(m, at);
        check_fits_memory(body_parameters(m) + double(m.vocab + m.context) * m.d_model, at, "vocab", m.vocab);
      }};
  return s;
}

// ---- the families -------------------------------------------------------------------------

namespace {
// A family's keys: its name, its own sections (task, data, model), then the optimizer, the
// schedule, the loop and the sweep every family has.
template <class F>
std::vector<FieldDef<F>> family_fields(std::vector<FieldDef<F>> own, const char* optim, const char* schedule,
                                       const char* train) {
  std::vector<FieldDef<F>> f{
      required("name", &F::name, path_component(), "experiment name; names its output directory")};
  f.insert(f.end(), own.begin(), own.end());
  f.push_back(section("optim", &F::optim, optim));
  f.push_back(section("schedule", &F::schedule, schedule));
  f.push_back(section("train", &F::train, train));
  f.push_back(section("sweep", &F::sweep, "runs: grid x variants x seeds"));
  return f;
}
constexpr const char* kEpochSchedule = "the learning-rate schedule (milestones in epochs)";
}  // namespace

const Schema<SyntheticConfig>& SyntheticConfig::schema() {
  using T = SyntheticConfig;
  static const Schema<T> s{family_fields<T>({section("task", &T::task, "the sequence task and its generated data"),
                                             section("model", &T::model, "the encoder")},
                                            "the optimizer", kEpochSchedule, "the epoch loop"),
                           [](const T& c, const Located& at) { check_lr_floor(c, at); }};
  return s;
}

const Schema<VisionConfig>& VisionConfig::schema() {
  using T = VisionConfig;
  static const Schema<T> s{family_fields<T>({section("task", &T::task, "the task family and the split seed"),
                                             section("data", &T::data, "the image dataset and its augmentation"),
                                             section("model", &T::model, "the ViT")},
                                            "the optimizer", kEpochSchedule, "the epoch loop"),
                           [](const T& c, const Located& at) {
                             check_lr_floor(c, at);
                             const int64_t side = native_image_side(c.data.dataset);
                             vision_geometry(c, side, side, &at);
                           }};
  return s;
}

int64_t native_image_side(DatasetName d) {
  switch (d) {
    case DatasetName::mnist:
    case DatasetName::fashion_mnist: return 28;
    case DatasetName::cifar10:
    case DatasetName::cifar100: return 32;
    case DatasetName::tinyimagenet: return 64;
  }
  return 0;
}

int64_t native_image_channels(DatasetName d) {
  return d == DatasetName::mnist || d == DatasetName::fashion_mnist ? 1 : 3;
}

int64_t dataset_classes(DatasetName d) {
  switch (d) {
    case DatasetName::cifar100: return 100;
    case DatasetName::tinyimagenet: return 200;
    default: return 10;
  }
}

ImageGeometry vision_geometry(const VisionConfig& c, int64_t height, int64_t width, const Located* at) {
  auto fail = [&](const char* key, int value, const std::string& expected) {
    if (at) at->fail(key, value, expected);
    throw ValueError(cat(key, ": ", value, " is not valid: expected ", expected));
  };
  ImageGeometry g;
  g.height = c.data.image_size > 0 ? c.data.image_size : height;
  g.width = c.data.image_size > 0 ? c.data.image_size : width;
  const std::string images = cat("the ", g.height, "x", g.width, " images of ", enum_name(c.data.dataset));
  const int64_t pad = c.data.pad_to;
  if (pad > 0 && (pad < g.height || pad < g.width))
    fail("data.pad_to", c.data.pad_to, cat("0 or a size of at least ", images));
  g.padded_height = std::max(g.height, pad);
  g.padded_width = std::max(g.width, pad);
  const int64_t p = c.model.patch;
  if (c.model.pad_to_patch) {
    g.padded_height = (g.padded_height + p - 1) / p * p;
    g.padded_width = (g.padded_width + p - 1) / p * p;
  }
  if (g.padded_height % p != 0 || g.padded_width % p != 0) {
    const std::string padded = g.padded_height == g.height && g.padded_width == g.width
                                   ? images
                                   : cat(images, " padded to ", g.padded_height, "x", g.padded_width);
    fail("model.patch", c.model.patch,
         cat("a patch size that divides ", padded, " (or model.pad_to_patch: true to pad them)"));
  }
  return g;
}

const Schema<AnomalyConfig>& AnomalyConfig::schema() {
  using T = AnomalyConfig;
  static const Schema<T> s{family_fields<T>({section("task", &T::task, "the task family and the seed of the sets"),
                                             section("data", &T::data,
                                                     "the image dataset, the element features and the sets"),
                                             section("model", &T::model, "the set transformer")},
                                            "the optimizer", kEpochSchedule, "the epoch loop"),
                           [](const T& c, const Located& at) { check_lr_floor(c, at); }};
  return s;
}

const Schema<ConvertStudy>& ConvertStudy::schema() {
  using T = ConvertStudy;
  static const Schema<T> s{
      {
          field("methods", &T::methods, {ConvertMethod::copy_k, ConvertMethod::average, ConvertMethod::svd},
                "conversions compared: copy-k (W_kv = W_k), average ((W_k + W_v) / 2), svd (data-aware, maps "
                "folded into W_q and W_o)"),
          field("calibration_batches", &T::calibration_batches, 16, in_range(1, 1 << 20),
                "training batches (train.batch_size x model.context tokens) the svd fit reads"),
          field("finetune_steps", &T::finetune_steps, 100, in_range(1, 1 << 30),
                "optimizer steps of each converted model's fine-tune (the scratch run trains train.steps + these)"),
          field("finetune_lr", &T::finetune_lr, 1e-3, greater_than(0.0), "the fine-tune's peak learning rate"),
          field("finetune_warmup_steps", &T::finetune_warmup_steps, 10, at_least(0), "the fine-tune's warmup steps"),
          field("finetune_eval_every", &T::finetune_eval_every, 20, in_range(1, 1 << 30),
                "steps between the fine-tune's validations"),
      },
      [](const T& c, const Located& at) {
        if (c.methods.empty()) at.fail("methods", "[]", "a non-empty list of copy-k, average, svd");
        for (size_t i = 0; i < c.methods.size(); ++i)
          for (size_t j = 0; j < i; ++j)
            if (c.methods[i] == c.methods[j]) at.fail("methods", enum_name(c.methods[i]), "each method listed once");
        if (c.finetune_warmup_steps >= c.finetune_steps)
          at.fail("finetune_warmup_steps", c.finetune_warmup_steps,
                  cat("fewer than convert.finetune_steps = ", c.finetune_steps));
      }};
  return s;
}

const Schema<LmConfig>& LmConfig::schema() {
  using T = LmConfig;
  static const Schema<T> s{
      fields(family_fields<T>({section("task", &T::task, "the task family"),
                               section("data", &T::data, "where the text and the tokenizer are"),
                               section("lm", &T::lm, "the token data"), section("model", &T::model, "the GPT")},
                              "the optimizer (adamw)", "the learning-rate schedule (in steps)",
                              "the step-counted loop"),
             {section("convert", &T::convert,
                      "the conversion study of `qkvlab convert-study` (not read by `qkvlab run`)")}),
      [](const T& c, const Located& at) {
        if (c.optim.name != OptimName::adamw) at.fail("optim.name", enum_name(c.optim.name), "adamw for task.kind lm");
        if (c.schedule.warmup_steps >= c.train.steps)
          at.fail("schedule.warmup_steps", c.schedule.warmup_steps, cat("fewer than train.steps = ", c.train.steps));
        check_lr_floor(c, at);
      }};
  return s;
}

}  // namespace qkv::experiment
