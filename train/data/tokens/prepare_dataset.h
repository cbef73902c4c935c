// Prepared language-model datasets: `qkvlab data prepare` turns text sources into token shards
// plus a dataset.json that describes them, and TokenBatches reads that description back.
//
// Every document is encoded with GPT-2's BPE (its "<|endoftext|>" spelled out as ordinary text)
// and preceded by the end-of-text token, as llm.c does, giving one token stream over all inputs
// in order. The val split is either the validation inputs, apart from the training inputs (as
// SlimPajama ships train/ and validation/), or, without them, the last `val_fraction` of the
// training inputs' stream (cut at a token boundary); the rest is the train split. Token budgets
// (PrepareOptions::max_tokens) keep the first tokens of each split in stream order. Shards:
// DIR/train_000000.bin, ..., DIR/val_000000.bin, ...
// dataset.json is written last and atomically; shards it does not list are stale leftovers of an
// earlier run and are removed. The folder is locked while it is written (.qkvlab.lock,
// io/folder_lock.h), and the temporary files a killed prepare left in it are removed, saying so.
#pragma once
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "train/data/tokens/token_shard.h"

namespace qkv::data {

struct PrepareOptions {
  std::vector<std::filesystem::path> inputs;      // text / JSONL files, plain, .gz or .zst
  std::vector<std::filesystem::path> val_inputs;  // the val split's files; then val_fraction must be 0
  std::filesystem::path out;                      // created when missing
  std::filesystem::path tokenizer;                // a GPT-2 tokenizer folder (tokenizer_files.h)
  double val_fraction = 0.1;                      // in [0, 1); used without val_inputs
  int64_t shard_tokens = 100'000'000;
  // Token budgets, with val_inputs (0: all): the train split is the first max_tokens tokens of
  // the training inputs' stream, the val split the first val_max_tokens of the validation
  // inputs' (the official code's first ~10B training and ~10M validation tokens). Reading stops
  // once a budget is met: later files of that split are not tokenized.
  int64_t max_tokens = 0, val_max_tokens = 0;
  int threads = 2;       // encoding threads
  bool progress = true;  // progress bar (terminal) or lines on `log`
};

struct PreparedSplit {
  int64_t tokens = 0;
  std::vector<ShardFile> shards;
};

struct PrepareResult {
  int64_t documents = 0;
  int64_t bytes = 0, text_bytes = 0;  // input files as on disk; the text they decompress to
  PreparedSplit train, val;
  double seconds = 0;
};

// Validates everything (inputs exist, options in range, the tokenizer loads) before writing.
// IOError naming the holder when another process is writing options.out.
PrepareResult prepare_dataset(const PrepareOptions& options, std::FILE* log = stdout);

// options.out when its dataset.json already records this preparation (the same training and
// validation input paths, sizes and modification times, tokenizer folder, val fraction and
// shard size) and its shards are present; otherwise prepares it first, waiting while another
// process does. Returns options.out.
std::filesystem::path prepare_once(const PrepareOptions& options, std::FILE* log = stdout);

// dataset.json, as read back.
struct DatasetInfo {
  std::filesystem::path dir;
  int64_t vocab_size = 0;
  int32_t eot = 0;
  // split name -> its shards (paths inside dir), in stream order
  std::vector<std::pair<std::string, PreparedSplit>> splits;
  const PreparedSplit& split(const std::string& name) const;  // ValueError naming the known splits
};
// IOError naming dataset.json and the field when it is missing or malformed.
DatasetInfo read_dataset_info(const std::filesystem::path& dir);

}  // namespace qkv::data
