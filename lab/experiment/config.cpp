// The schema of the synthetic experiments: one line per key (name, member, default, rule, doc),
// the rules that span several keys, and parsing, writing and describing a whole Config.
#include "lab/experiment/config.h"

#include <algorithm>
#include <set>

namespace qkv::experiment {

namespace {

Rule<std::string> path_component() {
  return {"(non-empty, no '/', not '.' or '..')",
          [](std::string& s) { return !s.empty() && s != "." && s != ".." && s.find('/') == std::string::npos; }};
}

Rule<std::string> device_name() {
  return {"(cpu, cuda or cuda:N)", [](std::string& s) {
            if (s == "cpu" || s == "cuda") return true;
            if (!s.starts_with("cuda:") || s.size() == 5) return false;
            return std::all_of(s.begin() + 5, s.end(), [](char c) { return c >= '0' && c <= '9'; });
          }};
}

Rule<std::string> sharing_name() {
  return {"(QKV, Q=K-V, Q-K=V or Q=K=V; aliases qkv, qk, kv, k)", [](std::string& s) {
            auto canonical = canonical_sharing(s);
            if (canonical) s = *canonical;
            return canonical.has_value();
          }};
}

Rule<std::vector<int>> increasing_epochs() {
  return {"(epochs >= 1, increasing)", [](std::vector<int>& v) {
            for (size_t i = 0; i < v.size(); ++i)
              if (v[i] < 1 || (i > 0 && v[i] <= v[i - 1])) return false;
            return true;
          }};
}

Rule<std::vector<Variant>> variant_list() {
  return {"(non-empty, no repeats)", [](std::vector<Variant>& v) {
            std::set<std::string> names;
            for (const Variant& x : v) names.insert(x.name);
            return !v.empty() && names.size() == v.size();
          }};
}

Rule<double> unit_closed_above() {
  return {"in (0, 1]", [](double& v) { return v > 0 && v <= 1; }};
}

}  // namespace

const Schema<TaskConfig>& TaskConfig::schema() {
  using T = TaskConfig;
  static const Schema<T> s{
      {
          field("kind", &T::kind, "synthetic", one_of({"synthetic", "vision", "anomaly", "lm"}),
                "task family: synthetic sequences, image classification, set anomaly detection, or language modeling"),
          field("name", &T::name, TaskName::reverse, "which synthetic task (paper Table 1; kind synthetic)"),
          field("length", &T::length, 16, at_least(2), "sequence length n (swap needs it even)"),
          field("vocab", &T::vocab, 10, at_least(2), "tokens are drawn uniformly from 0..vocab-1"),
          field("train_size", &T::train_size, 50000, at_least(1), "training examples"),
          field("val_size", &T::val_size, 1000, at_least(1), "validation examples (best checkpoint)"),
          field("test_size", &T::test_size, 10000, at_least(1), "test examples (reported accuracy)"),
          field("data_seed", &T::data_seed, 0, at_least(0), "seed of the generated data sets"),
      },
      [](const T& t, const Located& at) {
        if (t.name == TaskName::swap && t.length % 2 != 0)
          at.fail("length", t.length, "an even integer (swap exchanges the two halves)");
      }};
  return s;
}

const Schema<DataConfig>& DataConfig::schema() {
  using T = DataConfig;
  static const Schema<T> s{
      {
          field("root", &T::root, "data", "folder with the datasets' files (overridable: data.root=PATH)"),
          field("dataset", &T::dataset, DatasetName::mnist, "image dataset (kinds vision and anomaly)"),
          field("holdout", &T::holdout, 5000, at_least(1), "training examples held out for validation"),
          field("train_limit", &T::train_limit, 0, at_least(0), "use at most this many training examples; 0 = all"),
          field("test_limit", &T::test_limit, 0, at_least(0), "test on at most this many examples; 0 = all"),
          field("crop_padding", &T::crop_padding, 0, at_least(0), "random crop after zero padding (augmentation); 0 = off"),
          field("flip", &T::flip, false, "random horizontal flips (augmentation)"),
          field("workers", &T::workers, 2, at_least(0), "loader threads ahead of the training step; 0 = inline"),
          field("features", &T::features, FeatureSource::resnet34, "anomaly: element features from a frozen ResNet34 or a file"),
          field("resnet_weights", &T::resnet_weights, "", "anomaly: torchvision resnet34 weights (safetensors); empty = random init"),
          field("features_file", &T::features_file, "", "anomaly: features [N, F] and labels [N] (safetensors)"),
          field("set_size", &T::set_size, 10, at_least(3), "anomaly: images per set (one is the odd one out)"),
          field("train_sets", &T::train_sets, 20000, at_least(1), "anomaly: training sets"),
          field("val_sets", &T::val_sets, 1000, at_least(1), "anomaly: validation sets"),
          field("test_sets", &T::test_sets, 2000, at_least(1), "anomaly: test sets"),
      },
      [](const T& d, const Located& at) {
        if (d.features == FeatureSource::file && d.features_file.empty())
          at.fail("features_file", "\"\"", "a safetensors path when data.features is file");
      }};
  return s;
}

const Schema<LmDataConfig>& LmDataConfig::schema() {
  using T = LmDataConfig;
  static const Schema<T> s{
      {
          field("text", &T::text, {}, "text or JSONL files (plain, .gz, .zst) under data.root, tokenized once and cached"),
          field("tokens", &T::tokens, "", "or a folder made by `qkvlab data prepare` (absolute or under data.root)"),
          field("tokenizer", &T::tokenizer, "gpt2-tokenizer", "GPT-2 encoder.json + vocab.bpe (absolute or under data.root)"),
          field("val_fraction", &T::val_fraction, 0.1, in_half_open(0.0, 1.0), "lm.text: the last fraction of tokens validates"),
          field("sampling", &T::sampling, LmSamplingName::packed,
                "packed windows, or one document per sample truncated and padded (the official code)"),
          field("loss_on_padding", &T::loss_on_padding, false,
                "per_document: the loss counts the end-of-text padding, as the official code does"),
      },
      [](const T& l, const Located& at) {
        if (!l.text.empty() && !l.tokens.empty())
          at.fail("tokens", l.tokens, "empty when lm.text lists files (give one source of tokens)");
      }};
  return s;
}

const Schema<ModelConfig>& ModelConfig::schema() {
  using T = ModelConfig;
  static const Schema<T> s{
      {
          field("kind", &T::kind, "encoder", one_of({"encoder", "vit", "set_transformer", "gpt"}),
                "architecture: the synthetic encoder, a ViT, the anomaly set transformer, or GPT"),
          field("patch", &T::patch, 7, at_least(1), "vit: patch size (must divide the image size)"),
          field("vocab", &T::vocab, 50304, at_least(2), "gpt: output vocabulary (GPT-2's 50257 padded to 50304)"),
          field("context", &T::context, 1024, at_least(2), "gpt: positions = training sequence length"),
          field("d_model", &T::d_model, 64, at_least(1), "model width"),
          field("layers", &T::layers, 2, at_least(1), "encoder layers"),
          field("heads", &T::heads, 4, at_least(1), "query heads (must divide d_model)"),
          field("kv_heads", &T::kv_heads, 0, at_least(0), "key/value heads; 0 = heads (set by GQA/MQA variants)"),
          field("ffn_mult", &T::ffn_mult, 2.0, greater_than(0.0), "FFN width = ffn_mult * d_model"),
          field("activation", &T::activation, Activation::relu, "FFN activation"),
          field("norm", &T::norm, Norm::post, "post-LN (the paper's synthetic runs) or pre-LN"),
          field("dropout", &T::dropout, 0.1, in_half_open(0.0, 1.0), "dropout probability"),
          field("pos2d_channels", &T::pos2d_channels, 10, at_least(2), "channels m of the 2D positional scores (even)"),
          field("head", &T::head, HeadKind::mlp, "output head; mlp = Linear-LayerNorm-ReLU-Dropout-Linear"),
          field("sharing", &T::sharing, "QKV", sharing_name(), "projection sharing (set by the variant)"),
          field("pos2d", &T::pos2d, false, "add the 2D positional scores, the (+) variants (set by the variant)"),
      },
      [](const T& m, const Located& at) {
        if (m.d_model % m.heads != 0)
          at.fail("heads", m.heads, cat("an integer that divides model.d_model = ", m.d_model));
        if (m.kv_heads != 0 && (m.kv_heads > m.heads || m.heads % m.kv_heads != 0))
          at.fail("kv_heads", m.kv_heads, cat("0 or an integer that divides model.heads = ", m.heads));
        if (m.pos2d_channels % 2 != 0) at.fail("pos2d_channels", m.pos2d_channels, "an even integer >= 2");
      }};
  return s;
}

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

const Schema<ScheduleConfig>& ScheduleConfig::schema() {
  using T = ScheduleConfig;
  static const Schema<T> s{
      {
          field("name", &T::name, ScheduleName::cosine, "learning-rate schedule"),
          field("warmup", &T::warmup, 0.05, in_half_open(0.0, 1.0), "linear warmup, fraction of the total steps"),
          field("warmup_steps", &T::warmup_steps, 0, at_least(0), "linear warmup in steps; overrides warmup when > 0"),
          field("min_lr", &T::min_lr, 0.0, at_least(0.0), "final learning rate of the cosine schedule"),
          field("milestones", &T::milestones, {}, increasing_epochs(), "multistep: epochs where lr *= gamma"),
          field("gamma", &T::gamma, 0.1, unit_closed_above(), "multistep: decay factor"),
      },
      [](const T& sch, const Located& at) {
        if (sch.name == ScheduleName::multistep && sch.milestones.empty())
          at.fail("milestones", "[]", "a non-empty list of epochs when schedule.name is multistep");
      }};
  return s;
}

const Schema<TrainConfig>& TrainConfig::schema() {
  using T = TrainConfig;
  static const Schema<T> s{{
      field("epochs", &T::epochs, 2, at_least(1), "passes over the training set"),
      field("steps", &T::steps, 1000, at_least(1), "lm: optimizer steps"),
      field("grad_accum", &T::grad_accum, 1, at_least(1), "lm: micro-batches of batch_size per optimizer step"),
      field("eval_every", &T::eval_every, 100, at_least(1), "lm: steps between validations and checkpoints"),
      field("eval_batches", &T::eval_batches, 20, at_least(1), "lm: validation batches (of eval_batch_size)"),
      field("keep_checkpoints", &T::keep_checkpoints, 2, at_least(1), "lm: newest checkpoints kept"),
      field("skip_grad_norm", &T::skip_grad_norm, 0.0, at_least(0.0),
            "lm: skip an optimizer step whose gradient norm exceeds this; 0 = never"),
      field("peak_tflops", &T::peak_tflops, 0.0, at_least(0.0),
            "lm: device peak TFLOP/s for MFU; 0 = measure a float32 GEMM at start"),
      field("batch_size", &T::batch_size, 128, at_least(1), "training batch size"),
      field("device", &T::device, "cpu", device_name(), "where to train"),
      field("threads", &T::threads, 0, at_least(0), "CPU threads; 0 = all cores"),
      field("log_every", &T::log_every, 50, at_least(1), "steps between loss lines"),
      field("eval_batch_size", &T::eval_batch_size, 512, at_least(1), "batch size of validation and test"),
      field("seed", &T::seed, 0, at_least(0), "seed of initialization, shuffling and dropout (set by sweep.seeds)"),
  }};
  return s;
}

const Schema<SweepConfig>& SweepConfig::schema() {
  using T = SweepConfig;
  static const Schema<T> s{{
      field("grid", &T::grid, {}, "dotted key -> values; runs take every combination"),
      field("variants", &T::variants, {Variant{"QKV", "QKV", false, 0}}, variant_list(), "attention variants to run"),
      field("seeds", &T::seeds, {0}, int_list(0, true, true), "training seeds to run"),
  }};
  return s;
}

const Schema<Config>& Config::schema() {
  using T = Config;
  static const Schema<T> s{
      {
          required("name", &T::name, path_component(), "experiment name; names its output directory"),
          section("task", &T::task, "the task and its data"),
          section("data", &T::data, "image data (vision and anomaly tasks)"),
          section("lm", &T::lm, "token data (language modeling)"),
          section("model", &T::model, "the encoder"),
          section("optim", &T::optim, "the optimizer"),
          section("schedule", &T::schedule, "the learning-rate schedule"),
          section("train", &T::train, "the training loop"),
          section("sweep", &T::sweep, "runs: grid x variants x seeds"),
      },
      [](const T& c, const Located& at) {
        const char* model_for = c.task.kind == "synthetic" ? "encoder"
                                : c.task.kind == "vision"  ? "vit"
                                : c.task.kind == "lm"      ? "gpt"
                                                           : "set_transformer";
        if (c.model.kind != model_for)
          at.fail("model.kind", c.model.kind, cat("'", model_for, "' for task.kind ", c.task.kind));
        if (c.task.kind == "lm") {
          if (c.model.pos2d)
            at.fail("model.pos2d", "true", "false: the (+) variants' 2D scores are for non-causal tasks only");
          if (c.lm.text.empty() && c.lm.tokens.empty())
            at.fail("lm.text", "[]", "a list of text files, or lm.tokens naming a prepared token folder");
          if (c.optim.name != OptimName::adamw)
            at.fail("optim.name", enum_name(c.optim.name), "adamw for task.kind lm");
          if (c.schedule.name == ScheduleName::multistep)
            at.fail("schedule.name", "multistep", "cosine or constant for task.kind lm (it counts steps, not epochs)");
          if (c.schedule.warmup_steps >= c.train.steps)
            at.fail("schedule.warmup_steps", c.schedule.warmup_steps, cat("fewer than train.steps = ", c.train.steps));
        }
        if (c.schedule.min_lr > c.optim.lr)
          at.fail("schedule.min_lr", format_number(c.schedule.min_lr),
                  cat("a number <= optim.lr = ", format_number(c.optim.lr)));
      }};
  return s;
}

// ---- codecs of the experiment-specific value types ------------------------------------------

std::string Codec<Variant>::type() { return "variant name"; }

bool Codec<Variant>::parse(const Node& n, Variant& out, const std::string& key) {
  if (!n.is_scalar()) return false;
  auto v = try_parse_variant(n.text);
  if (!v) fail_at(n.source, key, ": unknown variant '", n.text, "'; accepted: ", accepted_variant_forms());
  out = *v;
  return true;
}

Node Codec<Variant>::emit(const Variant& v) { return Node::scalar(v.name); }

std::string Codec<Grid>::type() { return "map: dotted key -> non-empty list of values"; }

namespace {

// Keys a grid may not sweep, and why.
std::string unsweepable(const std::string& key) {
  if (key.starts_with("sweep.")) return "the sweep cannot sweep itself";
  if (key == "name") return "it names the experiment";
  if (key == "model.sharing" || key == "model.pos2d" || key == "model.kv_heads")
    return "it is set from sweep.variants (list variants such as Q=K-V, (Q=K-V)+, GQA-4 there)";
  if (key == "train.seed") return "it is set from sweep.seeds";
  return "";
}

}  // namespace

bool Codec<Grid>::parse(const Node& n, Grid& out, const std::string& grid_key) {
  if (n.is_null()) {
    out.clear();
    return true;
  }
  if (!n.is_map()) return false;
  std::vector<std::string> leaves;
  for (const KeyInfo& k : config_keys())
    if (!k.section && unsweepable(k.key).empty()) leaves.push_back(k.key);
  Grid grid;
  for (const Entry& e : n.entries) {
    const std::string key = grid_key + "." + e.key;
    const KeyInfo* info = find_config_key(e.key);
    if (!info || info->section) {
      const std::string suggestion = closest_key(e.key, leaves);
      if (!suggestion.empty()) fail_at(e.source, "unknown key '", key, "'; did you mean '", suggestion, "'?");
      fail_at(e.source, "unknown key '", key, "': grid keys are dotted schema keys such as model.d_model");
    }
    if (const std::string why = unsweepable(e.key); !why.empty()) fail_at(e.source, key, ": cannot be swept: ", why);
    if (!e.value.is_sequence() || e.value.items.empty())
      fail_at(e.value.source, key, ": ", e.value.describe(), " is not valid: expected a non-empty list of ",
              info->type);
    for (size_t i = 0; i < e.value.items.size(); ++i) {
      info->check(e.value.items[i], cat(key, "[", i, "]"));
      for (size_t j = 0; j < i; ++j)
        if (e.value.items[j] == e.value.items[i])
          fail_at(e.value.items[i].source, key, ": ", e.value.items[i].describe(), " is listed twice");
    }
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

// ---- whole configurations --------------------------------------------------------------------

const std::vector<KeyInfo>& config_keys() {
  static const std::vector<KeyInfo> keys = [] {
    std::vector<KeyInfo> out;
    flatten_keys<Config>("", out);
    return out;
  }();
  return keys;
}

const KeyInfo* find_config_key(std::string_view dotted) {
  for (const KeyInfo& k : config_keys())
    if (k.key == dotted) return &k;
  return nullptr;
}

Config parse_config(const Node& tree) {
  static const ParseContext ctx = [] {
    ParseContext c;
    for (const KeyInfo& k : config_keys()) c.keys.push_back(k.key);
    return c;
  }();
  return parse_struct<Config>(tree, "", ctx);
}

Config config_from_yaml(const std::string& text, const std::string& origin) {
  return parse_config(parse_yaml(text, origin));
}

Node config_to_tree(const Config& config) { return emit_struct(config); }

std::string to_yaml(const Config& config) { return emit_yaml(config_to_tree(config)); }

std::string describe_schema() {
  const auto& keys = config_keys();
  size_t key_w = 0, type_w = 0;
  for (const KeyInfo& k : keys) {
    if (k.section) continue;
    key_w = std::max(key_w, k.key.size());
    type_w = std::max(type_w, k.type.size());
  }
  type_w = std::min<size_t>(type_w, 44);  // longer types push their line's default along
  auto pad = [](const std::string& s, size_t w) { return s + std::string(w > s.size() ? w - s.size() : 0, ' '); };
  std::string out = "Experiment file keys (dotted; type, default, meaning):\n";
  for (const KeyInfo& k : keys) {
    if (k.section) {
      out += "\n" + k.key + ": " + k.doc + "\n";
      continue;
    }
    const std::string def = k.default_text == "required" ? "required" : "default " + k.default_text;
    out += "  " + pad(k.key, key_w) + "  " + pad(k.type, type_w) + "  " + def + "  " + k.doc + "\n";
  }
  out +=
      "\nscales: name -> {dotted key: value}, applied over the file when the scale is chosen.\n"
      "Overrides key=value (YAML value) apply last: file < scale < overrides.\n"
      "Variants: " +
      accepted_variant_forms() + ".\n";
  return out;
}

}  // namespace qkv::experiment
