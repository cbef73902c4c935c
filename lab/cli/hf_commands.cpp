// qkvlab import HF_FOLDER --out DIR [--name NAME] [--tokens DIR] [--strict]: a Hugging Face GPT-2 or
// Llama checkpoint folder made into a language-model run folder (lab/infer/hf/import.h).
// qkvlab export RUN --format hf-gpt2|hf-llama --out DIR [--tokenizer DIR] [--data-root DIR]: a run of
// any variant written as a folder transformers loads (lab/infer/hf/export.h).
#include <cstdio>

#include "lab/cli/commands.h"
#include "lab/infer/hf/export.h"
#include "lab/infer/hf/import.h"
#include "tensor/error.h"
#include "tensor/format.h"

namespace qkv::cli {

namespace {

void import_model(const infer::ImportRequest& r) {
  const infer::ImportedRun run = infer::import_hf(r);
  for (const std::string& w : run.warnings) std::fprintf(stderr, "import: warning: %s\n", w.c_str());
  const nn::GPTConfig& g = run.gpt;
  std::printf("import: %s -> %s\n", r.source.string().c_str(), run.folder.string().c_str());
  std::printf(
      "  %s: %lld layers, d_model %lld, %lld heads (%lld KV) of %lld, context %lld, vocabulary %lld, %s "
      "parameters\n",
      run.architecture.c_str(), (long long)g.layers, (long long)g.d_model(), (long long)g.attention.heads,
      (long long)g.attention.kv_head_count(), (long long)g.attention.head_dim(), (long long)g.context,
      (long long)g.vocab, with_commas(run.parameters).c_str());
  std::printf("  tokenizer: %s\n", run.has_tokenizer
                                       ? "copied to tokenizer/"
                                       : "none in the folder; lm.tokenizer is gpt2-tokenizer under data.root");
  std::printf("  wrote %s; next: qkvlab generate %s, or qkvlab convert %s --out DIR --token-data TOKENS\n",
              run.checkpoint.string().c_str(), run.folder.string().c_str(), run.folder.string().c_str());
}

void export_model(const infer::ExportRequest& r) {
  const infer::ExportedModel m = infer::export_hf(r);
  const bool llama = r.format == infer::ExportFormat::hf_llama;
  std::printf("export: %s (%s, %s) -> %s (%s)\n", r.run.string().c_str(), nn::variant_name(m.variant).c_str(),
              m.checkpoint.filename().string().c_str(), m.folder.string().c_str(), llama ? "hf-llama" : "hf-gpt2");
  if (!m.has_tokenizer)
    std::printf("  no tokenizer written: the run's could not be read here (give --tokenizer DIR or --data-root)\n");
  std::printf("  load it with transformers.%s.from_pretrained(\"%s\")\n",
              llama ? "LlamaForCausalLM" : "GPT2LMHeadModel", m.folder.string().c_str());
}

}  // namespace

void add_hf_commands(CLI::App& app) {
  {
    auto r = std::make_shared<infer::ImportRequest>();
    auto* cmd =
        app.add_subcommand("import", "Make a Hugging Face GPT-2 or Llama checkpoint folder a language-model run");
    cmd->footer(
        "The folder holds config.json and model.safetensors (or model.safetensors.index.json and its shards),\n"
        "and usually the tokenizer (vocab.json + merges.txt, or tokenizer.json: GPT-2's, or Llama 3's\n"
        "layout). config.json's model_type picks GPT2LMHeadModel (gpt2) or LlamaForCausalLM (llama).\n"
        "The run folder it writes (QKV, or GQA/MQA with the checkpoint's KV heads) is one generate, analyze,\n"
        "convert, eval and bench decode open like a trained run. It has no data of its own unless --tokens\n"
        "names a folder made by `qkvlab data prepare`; give the others --token-data.");
    cmd->add_option("source", r->source, "the Hugging Face folder")->required();
    cmd->add_option("--out", r->out, "the run folder to write (new or empty)")->required();
    cmd->add_option("--name", r->name, "the experiment name in its config (default: the source folder's name)");
    cmd->add_option("--tokens", r->tokens, "a prepared token folder to record as the run's data (lm.tokens)");
    cmd->add_flag("--strict", r->strict,
                  "refuse a config.json key the import does not know (default: a warning naming it)");
    cmd->callback([r] { import_model(*r); });
  }
  {
    auto r = std::make_shared<infer::ExportRequest>();
    auto format = std::make_shared<std::string>();
    auto* cmd = app.add_subcommand("export", "Write a language-model run in another format (hf-gpt2, hf-llama)");
    cmd->footer(
        "hf-gpt2: a folder transformers' GPT2LMHeadModel.from_pretrained loads, computing the run's logits (a\n"
        "model.kind gpt run). Every variant exports: a shared projection is written as the copies it stands for\n"
        "(Q-K=V's K=V twice), the KV heads of GQA/MQA are repeated for their query heads, a low-rank V residual\n"
        "is folded into V.\n"
        "hf-llama: LlamaForCausalLM, for a model.kind llama run: the same copies (K=V as k_proj = v_proj, which\n"
        "Llama turns into RoPE(s) and s as qkvlab does), the KV heads of GQA/MQA as they are.\n"
        "The (+) variants (2D positional scores) and linear attention have no form in either and are refused.");
    cmd->add_option("run", r->run, "a language-model run folder (trained, converted or imported)")->required();
    cmd->add_option("--format", *format, "the format: hf-gpt2 or hf-llama")
        ->required()
        ->check(CLI::IsMember({"hf-gpt2", "hf-llama"}));
    cmd->add_option("--out", r->out, "the folder to write (new or empty)")->required();
    cmd->add_option("--tokenizer", r->tokenizer, "the tokenizer folder, if the run's is not valid here");
    cmd->add_option("--data-root", r->data_root, "data.root for the run's tokenizer, if the run's is not valid here");
    cmd->callback([r, format] {
      r->format = *format == "hf-llama" ? infer::ExportFormat::hf_llama : infer::ExportFormat::hf_gpt2;
      export_model(*r);
    });
  }
}

}  // namespace qkv::cli
