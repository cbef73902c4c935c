#include "lab/infer/hf/import.h"

#include <algorithm>
#include <cctype>
#include <iterator>
#include <nlohmann/json.hpp>
#include <span>

#include "io/atomic_file.h"
#include "io/folder_lock.h"
#include "io/json_read.h"
#include "lab/experiment/config.h"
#include "lab/experiment/run_dir.h"
#include "lab/infer/generate.h"
#include "lab/infer/hf/gpt2_tensors.h"
#include "lab/infer/hf/llama_tensors.h"
#include "train/data/tokens/bpe.h"
#include "train/loops/lm_checkpoint.h"

namespace qkv::infer {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The files of the tokenizer layouts Gpt2Tokenizer::load reads, then their companions; a folder
// holding any of the first kLayoutFiles has a tokenizer, and every one present is copied.
constexpr const char* kTokenizerFiles[] = {
    "encoder.json",           "vocab.bpe", "vocab.json", "merges.txt", "tokenizer.json", "tokenizer_config.json",
    "special_tokens_map.json"};
constexpr size_t kLayoutFiles = 5;

bool has_tokenizer_files(const fs::path& folder) {
  return std::any_of(kTokenizerFiles, kTokenizerFiles + kLayoutFiles,
                     [&](const char* f) { return fs::exists(folder / f); });
}

// An experiment name from a folder name: letters, digits, '-', '_' and '.' kept.
std::string name_of(const fs::path& source) {
  std::string name = fs::absolute(source).lexically_normal().filename().string();
  if (name.empty()) name = fs::absolute(source).lexically_normal().parent_path().filename().string();
  for (char& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '_' && ch != '.') ch = '-';
  return name.empty() ? "imported" : name;
}

experiment::Activation activation_name(nn::Activation a) {
  switch (a) {
    case nn::Activation::gelu: return experiment::Activation::gelu;
    case nn::Activation::gelu_tanh: return experiment::Activation::gelu_tanh;
    case nn::Activation::relu: return experiment::Activation::relu;
  }
  return experiment::Activation::gelu;
}

experiment::RopeScalingName scaling_name(nn::RopeScaling s) {
  switch (s) {
    case nn::RopeScaling::none: return experiment::RopeScalingName::none;
    case nn::RopeScaling::linear: return experiment::RopeScalingName::linear;
    case nn::RopeScaling::llama3: return experiment::RopeScalingName::llama3;
  }
  return experiment::RopeScalingName::none;
}

// The run's experiment config, built as a typed LmConfig and checked by its schema: the model of
// `g`, one run of its variant (QKV with its KV heads).
experiment::Config run_config(const ImportRequest& r, const nn::GPTConfig& g, const fs::path& tokenizer) {
  using namespace experiment;
  const std::string origin = (r.out / "config.yaml").string();
  Config config = config_from_yaml("name: imported\ntask: {kind: lm}\n", origin);
  LmConfig& c = std::get<LmConfig>(config.family);
  c.name = r.name.empty() ? name_of(r.source) : r.name;
  c.lm.tokens = r.tokens.empty() ? "" : fs::absolute(r.tokens).lexically_normal().string();
  c.lm.tokenizer = tokenizer.string();
  GptModel& m = c.model;
  const nn::AttentionConfig& a = g.attention;
  const bool llama = bool(a.rope);
  m.kind = llama ? "llama" : "gpt";
  m.vocab = int(g.vocab);
  m.context = int(g.context);
  m.d_model = int(a.d_model);
  m.layers = int(g.layers);
  m.heads = int(a.heads);
  m.ffn_mult = double(g.ffn_width()) / double(a.d_model);
  m.dropout = g.dropout;
  if (llama) {
    const nn::RopeConfig& rope = *a.rope;
    m.head_dim = a.head_size > 0 ? int(a.head_size) : 0;
    m.rope_theta = rope.theta;
    m.rope_scaling = scaling_name(rope.scaling);
    m.rope_factor = rope.factor;
    m.rope_low_freq_factor = rope.low_freq_factor;
    m.rope_high_freq_factor = rope.high_freq_factor;
    m.rope_original_context = int(rope.original_context);
    m.rms_norm_eps = g.norm_eps;
    m.attention_bias = a.bias;
    m.mlp_bias = g.mlp_bias;
    m.tie_embeddings = g.tied_head;
  } else {
    m.activation = activation_name(g.activation);
  }
  c.sweep.variants = {nn::Variant{nn::Sharing::qkv, a.kv_heads, false}};
  c.sweep.seeds = {0};
  return parse_config(config_to_tree(config));  // the schema's checks, as a file's
}

// The folder's files and their sizes.
json files_record(const fs::path& config_file, const HfTensors& tensors) {
  json files = json::object();
  for (const auto& [name, t] : tensors) files[fs::path(t.file).filename().string()] = fs::file_size(t.file);
  files["config.json"] = fs::file_size(config_file);
  return files;
}

}  // namespace

namespace {

// The checkpoint's model and its state in the GPT's names, by config.json's model_type.
struct Checkpoint {
  std::string architecture;
  nn::GPTConfig gpt;
  std::map<std::string, Tensor> state;
  std::vector<std::string> warnings;
  json files;   // the folder's files and sizes
  json config;  // config.json as read, for import.json
};

Checkpoint read_checkpoint(const ImportRequest& r, const fs::path& config_file) {
  const json j = read_json_file(config_file, "a Hugging Face config.json", uint64_t(16) << 20);
  const std::string type = j.is_object() && j.contains("model_type") && j["model_type"].is_string()
                               ? j["model_type"].get<std::string>()
                               : "gpt2";  // GPT-2 files from before model_type was written
  const HfTensors tensors = read_hf_tensors(r.source);
  if (type == "gpt2") {
    const HfGpt2Config hf = read_hf_gpt2_config(config_file, r.strict);
    return {"GPT-2", hf.gpt, gpt_state_from_hf(tensors, hf), hf.warnings, files_record(config_file, tensors), j};
  }
  if (type == "llama") {
    const HfLlamaConfig hf = read_hf_llama_config(config_file, r.strict);
    return {"Llama", hf.gpt, llama_state_from_hf(tensors, hf), hf.warnings, files_record(config_file, tensors), j};
  }
  throw IOError(cat(config_file.string(), ": key 'model_type': ", j["model_type"].dump(),
                    " is not supported: expected \"gpt2\" (GPT2LMHeadModel) or \"llama\" (LlamaForCausalLM)"));
}

}  // namespace

ImportedRun import_hf(const ImportRequest& r) {
  std::error_code ec;
  check<IOError>(fs::is_directory(r.source), "import: ", r.source.string(), " is not a folder");
  check<IOError>(!fs::exists(r.out, ec) || (fs::is_directory(r.out) && fs::is_empty(r.out)), "import --out ",
                 r.out.string(), ": already exists and is not an empty folder; give a new folder");
  if (!r.tokens.empty())
    check<IOError>(fs::is_regular_file(fs::path(r.tokens) / "dataset.json"), "import --tokens ", r.tokens,
                   ": not a folder made by `qkvlab data prepare` (no dataset.json)");

  const fs::path config_file = r.source / "config.json";
  Checkpoint ckpt = read_checkpoint(r, config_file);
  Generator gen(0);
  nn::GPT model(ckpt.gpt, &gen);
  model.load_state_dict(ckpt.state);
  const fs::path single = r.source / "model.safetensors";
  check_finite_weights(model, (fs::exists(single) ? single : r.source / "model.safetensors.index.json").string());

  ImportedRun out;
  out.architecture = ckpt.architecture;
  out.gpt = ckpt.gpt;
  out.parameters = model.num_parameters();
  out.has_tokenizer = has_tokenizer_files(r.source);
  out.warnings = ckpt.warnings;
  if (out.has_tokenizer) {
    const data::Gpt2Tokenizer tok = data::Gpt2Tokenizer::load(r.source);  // errors name the file and key
    check<ValueError>(tok.vocab_size() <= ckpt.gpt.vocab, "import: ", r.source.string(), ": the tokenizer has ",
                      tok.vocab_size(), " tokens but config.json's vocab_size is ", ckpt.gpt.vocab);
  }

  // The config is checked before anything is written.
  const fs::path tokenizer = fs::absolute(r.out / "tokenizer").lexically_normal();
  // Without tokenizer files, GPT-2's own (gpt2-tokenizer under data.root) is the config's default.
  const experiment::Config config = run_config(r, ckpt.gpt, out.has_tokenizer ? tokenizer : fs::path("gpt2-tokenizer"));

  const FolderLock lock(r.out, "imported model folder");
  if (out.has_tokenizer) {
    fs::create_directories(tokenizer);
    for (const char* f : kTokenizerFiles)
      if (fs::is_regular_file(r.source / f)) copy_file_atomically(r.source / f, tokenizer / f);
  }
  loops::save_lm_checkpoint(model, {}, loops::LmLoopState{}, r.out, 1);
  out.folder = r.out;
  out.checkpoint = *loops::latest_checkpoint(r.out);
  const json record{{"source", fs::absolute(r.source).lexically_normal().string()},
                    {"files", ckpt.files},
                    {"config", ckpt.config},
                    {"architecture", ckpt.architecture},
                    {"variant", nn::variant_name(config.sweep().variants.front())},
                    {"checkpoint", "step 0"}};
  experiment::write_model_folder_files(r.out, config, "import.json", record);
  return out;
}

}  // namespace qkv::infer
