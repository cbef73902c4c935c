// qkvlab data prepare INPUT... [--val FILE...] --out DIR [--tokenizer DIR | --data-root DIR]
//                               [--val-fraction F] [--shard-tokens N] [--threads N]
// Tokenizes text files (plain text: one file is one document; JSONL: one "text" per line; each
// plain, .gz or .zst) with GPT-2's BPE into train/val token shards and DIR/dataset.json, the
// folder the language-model runs read (train/data/tokens/prepare_dataset.h has the layout). The val
// split is the --val files when given, else the last --val-fraction of the inputs' tokens. DIR is
// locked while it is written; a second prepare of it stops, naming the process that holds it.
#include <algorithm>
#include <filesystem>
#include <thread>

#include "lab/cli/commands.h"
#include "tensor/error.h"
#include "train/data/tokens/prepare_dataset.h"

namespace qkv::cli {
namespace {

namespace fs = std::filesystem;

struct PrepareArgs {
  std::vector<std::string> inputs, val;
  std::string out, tokenizer, data_root;
  double val_fraction = 0.1;
  int64_t shard_tokens = 100'000'000;
  int64_t max_tokens = 0, val_max_tokens = 0;
  int threads = int(std::clamp<unsigned>(std::thread::hardware_concurrency(), 1, 4));
};

void prepare(const PrepareArgs& a) {
  data::PrepareOptions o;
  for (const std::string& in : a.inputs) o.inputs.emplace_back(in);
  for (const std::string& in : a.val) o.val_inputs.emplace_back(in);
  o.out = a.out;
  if (!a.tokenizer.empty()) o.tokenizer = a.tokenizer;
  else if (!a.data_root.empty()) o.tokenizer = fs::path(a.data_root) / "gpt2-tokenizer";
  else
    throw ValueError(
        "data prepare: no tokenizer: pass --tokenizer DIR (holding encoder.json + vocab.bpe, vocab.json + merges.txt or tokenizer.json) or "
        "--data-root DIR (holding gpt2-tokenizer/)");
  o.val_fraction = a.val.empty() ? a.val_fraction : 0.0;  // --val excludes --val-fraction (CLI11)
  o.shard_tokens = a.shard_tokens;
  o.max_tokens = a.max_tokens;
  o.val_max_tokens = a.val_max_tokens;
  o.threads = std::max(1, a.threads);
  data::prepare_dataset(o, stdout);
}

}  // namespace

void add_data_command(CLI::App& app) {
  auto* data = app.add_subcommand("data", "Language-model data: tokenize text corpora into token shards");
  data->require_subcommand(1);
  auto a = std::make_shared<PrepareArgs>();
  auto* cmd = data->add_subcommand(
      "prepare", "Tokenize text / JSONL files (plain, .gz, .zst) with GPT-2's BPE into train/val token shards");
  cmd->add_option("inputs", a->inputs, "input files: text (one document each) or .jsonl (a \"text\" per line)")
      ->required();
  cmd->add_option("--out", a->out, "output folder for the shards and dataset.json")->required();
  cmd->add_option("--tokenizer", a->tokenizer,
                  "GPT-2 tokenizer folder: encoder.json + vocab.bpe, vocab.json + merges.txt or tokenizer.json");
  cmd->add_option("--data-root", a->data_root, "data folder; the tokenizer is its gpt2-tokenizer/ unless --tokenizer");
  auto* fraction = cmd->add_option("--val-fraction", a->val_fraction,
                                   "without --val: share of the token stream's end that goes to val (default 0.1)");
  cmd->add_option("--val", a->val,
                  "validation files, the whole val split (e.g. SlimPajama's validation/*.jsonl.zst); "
                  "put them after the inputs")
      ->excludes(fraction);
  cmd->add_option("--shard-tokens", a->shard_tokens, "tokens per shard file (default 100000000)");
  cmd->add_option("--max-tokens", a->max_tokens,
                  "with --val: the train split is the first N tokens of the inputs, in order (e.g. 10000000000 for "
                  "the official code's 10B); reading stops there (default 0: all)");
  cmd->add_option("--val-max-tokens", a->val_max_tokens,
                  "with --val: the val split is the first N tokens of the --val files, in order (default 0: all)");
  cmd->add_option("--threads", a->threads, "encoding threads (default: the cores, at most 4)");
  cmd->callback([a] { prepare(*a); });
}

}  // namespace qkv::cli
