#include "lab/infer/hf_import.h"

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
#include "lab/infer/hf_gpt2_tensors.h"
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

const char* yaml_activation(nn::Activation a) {
  switch (a) {
    case nn::Activation::gelu: return "gelu";
    case nn::Activation::gelu_tanh: return "gelu_tanh";
    case nn::Activation::relu: return "relu";
  }
  return "gelu";
}

std::string config_yaml(const ImportRequest& r, const nn::GPTConfig& g, const fs::path& tokenizer) {
  const auto q = [](const std::string& s) { return json(s).dump(); };
  const std::string name = r.name.empty() ? name_of(r.source) : r.name;
  const std::string tokens = r.tokens.empty() ? "" : fs::absolute(r.tokens).lexically_normal().string();
  return cat("name: ", q(name), "\ntask: {kind: lm}\n",                                               //
             "lm: {tokens: ", q(tokens), ", tokenizer: ", q(tokenizer.string()), "}\n",               //
             "model: {kind: gpt, activation: ", yaml_activation(g.activation), ", vocab: ", g.vocab,  //
             ", context: ", g.context, ", d_model: ", g.d_model(), ", layers: ", g.layers,            //
             ", heads: ", g.attention.heads, ", ffn_mult: ", json(double(g.ffn_width()) / double(g.d_model())).dump(),
             ", dropout: ", json(g.dropout).dump(), "}\n",  //
             "sweep: {variants: [QKV], seeds: [0]}\n");
}

json source_record(const ImportRequest& r, const fs::path& config_file, const HfTensors& tensors) {
  json files = json::object();
  for (const auto& [name, t] : tensors) files[fs::path(t.file).filename().string()] = fs::file_size(t.file);
  files["config.json"] = fs::file_size(config_file);
  return {{"source", fs::absolute(r.source).lexically_normal().string()},
          {"files", files},
          {"config", read_json_file(config_file, "a Hugging Face config.json", uint64_t(16) << 20)},
          {"variant", "QKV"},
          {"checkpoint", "step 0"}};
}

}  // namespace

ImportedRun import_hf_gpt2(const ImportRequest& r) {
  std::error_code ec;
  check<IOError>(fs::is_directory(r.source), "import: ", r.source.string(), " is not a folder");
  check<IOError>(!fs::exists(r.out, ec) || (fs::is_directory(r.out) && fs::is_empty(r.out)), "import --out ",
                 r.out.string(), ": already exists and is not an empty folder; give a new folder");
  if (!r.tokens.empty())
    check<IOError>(fs::is_regular_file(fs::path(r.tokens) / "dataset.json"), "import --tokens ", r.tokens,
                   ": not a folder made by `qkvlab data prepare` (no dataset.json)");

  const fs::path config_file = r.source / "config.json";
  const HfGpt2Config hf = read_hf_gpt2_config(config_file, r.strict);
  const HfTensors tensors = read_hf_tensors(r.source);
  const std::map<std::string, Tensor> state = gpt_state_from_hf(tensors, hf);
  Generator gen(0);
  nn::GPT model(hf.gpt, &gen);
  model.load_state_dict(state);
  const fs::path single = r.source / "model.safetensors";
  check_finite_weights(model, (fs::exists(single) ? single : r.source / "model.safetensors.index.json").string());

  ImportedRun out;
  out.gpt = hf.gpt;
  out.parameters = model.num_parameters();
  out.has_tokenizer = has_tokenizer_files(r.source);
  out.warnings = hf.warnings;
  if (out.has_tokenizer) {
    const data::Gpt2Tokenizer tok = data::Gpt2Tokenizer::load(r.source);  // errors name the file and key
    check<ValueError>(tok.vocab_size() <= hf.gpt.vocab, "import: ", r.source.string(), ": the tokenizer has ",
                      tok.vocab_size(), " tokens but config.json's vocab_size is ", hf.gpt.vocab);
  }

  // The config is checked before anything is written.
  const fs::path tokenizer = fs::absolute(r.out / "tokenizer").lexically_normal();
  // Without tokenizer files, GPT-2's own (gpt2-tokenizer under data.root) is the config's default.
  const std::string yaml_text = config_yaml(r, hf.gpt, out.has_tokenizer ? tokenizer : fs::path("gpt2-tokenizer"));
  const experiment::Config config = experiment::config_from_yaml(yaml_text, (r.out / "config.yaml").string());

  const FolderLock lock(r.out, "imported model folder");
  if (out.has_tokenizer) {
    fs::create_directories(tokenizer);
    for (const char* f : kTokenizerFiles)
      if (fs::is_regular_file(r.source / f)) copy_file_atomically(r.source / f, tokenizer / f);
  }
  loops::save_lm_checkpoint(model, {}, loops::LmLoopState{}, r.out, 1);
  out.folder = r.out;
  out.checkpoint = *loops::latest_checkpoint(r.out);
  experiment::write_model_folder_files(r.out, config, "import.json", source_record(r, config_file, tensors));
  return out;
}

}  // namespace qkv::infer
