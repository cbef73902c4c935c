// The language-model batch source over one split of a prepared dataset folder (dataset.json and
// its token shards, see prepare_dataset.h): deterministic, resumable [B, T] int64 batches of
// inputs and next-token targets.
//
// Three ways to cut the split into samples:
// - packed: the split's token stream (its shards concatenated) is cut into non-overlapping
//   windows of context+1 tokens at stride context (window w covers tokens [w*T, w*T + T]); inputs
//   are a window's first T tokens, targets its last T. A trailing remainder shorter than a window
//   is not served.
// - per_document: each document is one sample. A document starts at an end-of-text token (the
//   split's first one may start mid-document, where a fraction cut fell) and runs to the next.
//   The sample is the document followed by one end-of-text (its end), cut to context+1 tokens and
//   right-padded with end-of-text; T targets, those past the document's end -100 (cross_entropy's
//   ignore index) unless loss_on_padding.
// - official: per_document exactly as the study's official code samples it, to reproduce its
//   perplexities. The document without its leading end-of-text, cut to context+1 tokens and
//   right-padded with end-of-text; inputs are its first T tokens and the labels are those inputs
//   shifted by one inside the loss, so T-1 targets per row (the last position is -100, and the
//   (T+1)-th token is never used), the padding counted in the loss. It differs from
//   per_document in three ways at once (the first token, the target count, the padding), so it
//   is a mode of its own rather than flags that could combine into something neither code does;
//   loss_on_padding does not apply to it.
//
// Order: with shuffle, epoch e serves the samples in a Philox permutation keyed by (seed, e);
// without, in file order. next() wraps into the next epoch (reshuffled) by itself, also in the
// middle of a batch. The cursor (epoch, index of the next sample in that epoch's order) is all the
// state there is: seek(cursor()) later serves exactly the same batches.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "tensor/tensor.h"
#include "train/data/shard.h"
#include "train/data/tokens/token_shard.h"

namespace qkv::data {

enum class LmSampling { packed, per_document, official };

// "packed" / "per_document" / "official"; parse_lm_sampling throws ValueError naming the accepted values.
const char* lm_sampling_name(LmSampling s);
LmSampling parse_lm_sampling(const std::string& s);

struct TokenBatchOptions {
  int64_t batch = 8, context = 64;
  LmSampling sampling = LmSampling::packed;
  bool loss_on_padding = false;  // per_document only
  uint64_t seed = 0;
  bool shuffle = true;
  Shard shard;  // data-parallel: this rank's rows of every batch of `batch` rows (shard.h)
};

struct TokenCursor {
  int64_t epoch = 0, index = 0;  // the next sample: position `index` of epoch `epoch`'s order
  friend bool operator==(const TokenCursor&, const TokenCursor&) = default;
};

inline constexpr int64_t kIgnoreTarget = -100;

class TokenBatches {
 public:
  // Reads dataset_dir/dataset.json and maps the split's shards. IOError for a missing or corrupt
  // dataset.json or shard (or one whose token count disagrees with dataset.json); ValueError for
  // an unknown split, a batch or context below 1 (2 for official), or a split too short for one
  // sample.
  TokenBatches(const std::filesystem::path& dataset_dir, const std::string& split, TokenBatchOptions o);

  // inputs [B, T] int64, targets [B, T] int64 (the next tokens; -100 where nothing is predicted),
  // on the CPU; with a shard, this rank's rows of the B (the cursor moves past all B).
  void next(Tensor& inputs, Tensor& targets);

  TokenCursor cursor() const { return cursor_; }
  void seek(TokenCursor c);  // ValueError for a negative epoch or an index outside the epoch

  int64_t windows_per_epoch() const { return samples_; }  // windows (packed) or documents
  int64_t tokens() const { return total_; }               // tokens in the split
  int64_t batches_per_epoch() const { return (samples_ + options_.batch - 1) / options_.batch; }
  const TokenBatchOptions& options() const { return options_; }
  int32_t eot() const { return eot_; }

 private:
  void copy_tokens(int64_t start, int64_t count, int64_t* dst) const;  // split-global positions
  int64_t sample_at(TokenCursor c);                                    // the sample index served at c
  void fill_sample(int64_t sample, int64_t* in, int64_t* tgt);

  TokenBatchOptions options_;
  std::vector<TokenShard> shards_;
  std::vector<int64_t> shard_start_;  // split-global position of each shard's first token
  std::vector<int64_t> doc_start_;    // per_document: start of each document (+ the end)
  int64_t total_ = 0, samples_ = 0;
  int32_t eot_ = 0;
  TokenCursor cursor_;
  int64_t order_epoch_ = -1;
  std::vector<int64_t> order_;  // the permutation of order_epoch_ (empty: file order)
  std::vector<int64_t> scratch_;
};

}  // namespace qkv::data
