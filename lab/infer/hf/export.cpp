#include "lab/infer/hf/export.h"

#include <nlohmann/json.hpp>
#include <optional>

#include "io/atomic_file.h"
#include "io/folder_lock.h"
#include "io/safetensors.h"
#include "lab/experiment/lm_run.h"
#include "lab/infer/hf/gpt2_config.h"
#include "lab/infer/hf/gpt2_tensors.h"
#include "lab/infer/hf/llama_tensors.h"
#include "lab/infer/run_model.h"

namespace qkv::infer {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

void write_json(const fs::path& file, const json& j) {
  const std::string text = j.dump(2);
  write_file_atomically(file.string(), [&](std::ostream& os) { os << text << "\n"; });
}

// The run's tokenizer folder, or nullopt when it cannot be found or read (the export then has
// no tokenizer files; `why` says so).
std::optional<fs::path> tokenizer_folder(const experiment::LmConfig& c, const std::string& given, std::string& why) {
  fs::path dir = given.empty() ? fs::path(c.lm.tokenizer) : fs::path(given);
  if (given.empty() && dir.is_relative()) dir = fs::path(c.data.root) / dir;
  try {
    (void)data::Gpt2Tokenizer::load(dir);
    return dir;
  } catch (const Error& e) {
    why = e.what();
    return std::nullopt;
  }
}

// Hugging Face's names: vocab.json and merges.txt are encoder.json and vocab.bpe as they are; a
// tokenizer_config.json the tokenizer came with (an imported model's) is kept, else GPT-2's.
void write_tokenizer(const fs::path& from, const fs::path& out, int64_t context) {
  const bool openai = fs::exists(from / "encoder.json");
  const std::pair<const char*, const char*> files[] = {{openai ? "encoder.json" : "vocab.json", "vocab.json"},
                                                       {openai ? "vocab.bpe" : "merges.txt", "merges.txt"},
                                                       {"tokenizer.json", "tokenizer.json"}};
  for (const auto& [src, dst] : files)
    if (fs::is_regular_file(from / src)) copy_file_atomically(from / src, out / dst);
  if (fs::is_regular_file(from / "tokenizer_config.json")) {
    copy_file_atomically(from / "tokenizer_config.json", out / "tokenizer_config.json");
    return;
  }
  write_json(out / "tokenizer_config.json", {{"tokenizer_class", "GPT2Tokenizer"},
                                             {"model_max_length", context},
                                             {"add_prefix_space", false},
                                             {"bos_token", "<|endoftext|>"},
                                             {"eos_token", "<|endoftext|>"},
                                             {"unk_token", "<|endoftext|>"}});
}

const char* format_name(ExportFormat f) { return f == ExportFormat::hf_llama ? "hf-llama" : "hf-gpt2"; }

}  // namespace

ExportedModel export_hf(const ExportRequest& r) {
  const bool llama = r.format == ExportFormat::hf_llama;
  const experiment::LmRunFiles f = experiment::open_lm_run(r.run, "export");
  experiment::LmConfig c = f.config;
  if (!r.data_root.empty()) c.data.root = r.data_root;
  const nn::Variant& v = f.run.variant;
  check<ValueError>(!v.pos2d, "export --format ", format_name(r.format), ": ", nn::variant_name(v),
                    " has 2D positional scores, which ", llama ? "a Llama" : "GPT-2", " cannot express");
  std::error_code ec;
  check<IOError>(!fs::exists(r.out, ec) || (fs::is_directory(r.out) && fs::is_empty(r.out)), "export --out ",
                 r.out.string(), ": already exists and is not an empty folder; give a new folder");
  const auto model = load_run_model(f, c, kCPU);
  // ValueError for what the format cannot express.
  const auto tensors = llama ? hf_llama_tensors_of(*model) : hf_tensors_of(*model);

  ExportedModel out;
  out.variant = v;
  out.checkpoint = f.checkpoint;
  std::string why;
  const auto tokenizer = tokenizer_folder(c, r.tokenizer, why);
  out.has_tokenizer = tokenizer.has_value();
  std::optional<int64_t> eos;
  if (tokenizer) eos = data::Gpt2Tokenizer::load(*tokenizer).eot();

  const FolderLock lock(r.out, "exported model folder");
  if (tokenizer) write_tokenizer(*tokenizer, r.out, model->config().context);
  safetensors::save((r.out / "model.safetensors").string(), tensors, {{"format", "pt"}});
  write_json(r.out / "qkvlab_export.json", {{"run", fs::absolute(r.run).lexically_normal().string()},
                                            {"variant", nn::variant_name(v)},
                                            {"checkpoint", fs::absolute(f.checkpoint).lexically_normal().string()},
                                            {"tokenizer", tokenizer ? json(fs::absolute(*tokenizer).string()) : json()},
                                            {"format", format_name(r.format)}});
  write_json(r.out / "config.json", llama ? hf_llama_config_json(model->config(), std::nullopt, eos)
                                          : hf_gpt2_config_json(model->config(), eos));
  out.folder = r.out;
  return out;
}

}  // namespace qkv::infer
