// TokenBatches: packed windows or padded documents (ours, or the official code's) from a prepared
// split, in a per-epoch Philox order, with a cursor that resumes exactly.
#include "train/data/tokens/token_batches.h"

#include <algorithm>
#include <cstring>

#include "tensor/error.h"
#include "train/data/shuffle.h"
#include "train/data/tokens/prepare_dataset.h"

namespace qkv::data {

const char* lm_sampling_name(LmSampling s) {
  switch (s) {
    case LmSampling::packed: return "packed";
    case LmSampling::per_document: return "per_document";
    case LmSampling::official: return "official";
  }
  return "?";
}

LmSampling parse_lm_sampling(const std::string& s) {
  for (LmSampling m : {LmSampling::packed, LmSampling::per_document, LmSampling::official})
    if (s == lm_sampling_name(m)) return m;
  throw ValueError(cat("LM sampling '", s, "': expected packed, per_document or official"));
}

TokenBatches::TokenBatches(const std::filesystem::path& dataset_dir, const std::string& split, TokenBatchOptions o)
    : options_(o) {
  check<ValueError>(o.batch >= 1, "TokenBatches: batch must be at least 1, got ", o.batch);
  check<ValueError>(o.context >= 1, "TokenBatches: context must be at least 1, got ", o.context);
  check<ValueError>(o.sampling != LmSampling::official || o.context >= 2,
                    "TokenBatches: official sampling predicts context - 1 tokens per row, so context must be at "
                    "least 2, got ",
                    o.context);
  const DatasetInfo info = read_dataset_info(dataset_dir);
  const PreparedSplit& s = info.split(split);
  eot_ = info.eot;
  for (const ShardFile& f : s.shards) {
    TokenShard shard = read_token_shard(f.path);
    check<IOError>(shard.size() == f.tokens, f.path.string(), ": holds ", shard.size(), " tokens but ",
                   (dataset_dir / "dataset.json").string(), " lists ", f.tokens, " (field tokens): prepare again");
    check<IOError>(shard.vocab_size() == info.vocab_size, f.path.string(), ": vocab size ", shard.vocab_size(),
                   " (field vocab_size) differs from the dataset's ", info.vocab_size);
    shard_start_.push_back(total_);
    total_ += shard.size();
    shards_.push_back(std::move(shard));
  }
  const std::string what = cat("split '", split, "' of ", dataset_dir.string());
  if (o.sampling == LmSampling::packed) {
    samples_ = total_ >= 1 ? (total_ - 1) / o.context : 0;
    check<ValueError>(samples_ > 0, what, " has ", total_, " tokens, fewer than context + 1 = ", o.context + 1,
                      " for one window");
  } else {
    for (size_t k = 0; k < shards_.size(); ++k) {
      const uint16_t* t = shards_[k].data();
      for (int64_t i = 0; i < shards_[k].size(); ++i) {
        const int64_t pos = shard_start_[k] + i;
        if (pos == 0 || t[i] == eot_) {
          if (doc_start_.empty() || doc_start_.back() != pos) doc_start_.push_back(pos);
        }
      }
    }
    samples_ = int64_t(doc_start_.size());
    doc_start_.push_back(total_);
    check<ValueError>(samples_ > 0, what, " has no tokens, so no documents");
  }
  scratch_.resize(size_t(o.context + 1));
}

void TokenBatches::copy_tokens(int64_t start, int64_t count, int64_t* dst) const {
  auto k = size_t(std::upper_bound(shard_start_.begin(), shard_start_.end(), start) - shard_start_.begin() - 1);
  int64_t off = start - shard_start_[k];
  while (count > 0) {
    const int64_t take = std::min(count, shards_[k].size() - off);
    const uint16_t* src = shards_[k].data() + off;
    for (int64_t i = 0; i < take; ++i) dst[i] = src[i];
    dst += take;
    count -= take;
    ++k;
    off = 0;
  }
}

void TokenBatches::seek(TokenCursor c) {
  check<ValueError>(c.epoch >= 0, "TokenBatches::seek: epoch must be non-negative, got ", c.epoch);
  check<ValueError>(c.index >= 0 && c.index < samples_, "TokenBatches::seek: index ", c.index, " is outside [0, ",
                    samples_, ") (samples per epoch)");
  cursor_ = c;
}

int64_t TokenBatches::sample_at(TokenCursor c) {
  if (!options_.shuffle) return c.index;
  if (order_epoch_ != c.epoch) {
    order_ = epoch_order(samples_, options_.seed, c.epoch);
    order_epoch_ = c.epoch;
  }
  return order_[size_t(c.index)];
}

void TokenBatches::fill_sample(int64_t sample, int64_t* in, int64_t* tgt) {
  const int64_t T = options_.context;
  int64_t* s = scratch_.data();
  if (options_.sampling == LmSampling::packed) {
    copy_tokens(sample * T, T + 1, s);
    std::memcpy(in, s, size_t(T) * sizeof(int64_t));
    std::memcpy(tgt, s + 1, size_t(T) * sizeof(int64_t));
    return;
  }
  int64_t begin = doc_start_[size_t(sample)];
  const int64_t end = doc_start_[size_t(sample) + 1];
  if (options_.sampling == LmSampling::official) {  // the document without its separator
    if (begin < end) {
      int64_t first = 0;
      copy_tokens(begin, 1, &first);
      begin += first == eot_;
    }
    const int64_t take = std::min(end - begin, T + 1);
    copy_tokens(begin, take, s);
    std::fill(s + take, s + T + 1, int64_t(eot_));
    std::memcpy(in, s, size_t(T) * sizeof(int64_t));
    std::memcpy(tgt, s + 1, size_t(T - 1) * sizeof(int64_t));  // labels = inputs shifted; padding counted
    tgt[T - 1] = kIgnoreTarget;                                // the last input has no label
    return;
  }
  const int64_t len = end - begin, take = std::min(len, T + 1);
  copy_tokens(begin, take, s);
  std::fill(s + take, s + T + 1, int64_t(eot_));  // the document's end, then padding
  std::memcpy(in, s, size_t(T) * sizeof(int64_t));
  std::memcpy(tgt, s + 1, size_t(T) * sizeof(int64_t));
  const int64_t real = std::min(len + 1, T + 1);  // tokens of the sample that are data, not padding
  if (!options_.loss_on_padding)
    for (int64_t j = std::max<int64_t>(real - 1, 0); j < T; ++j) tgt[j] = kIgnoreTarget;
}

void TokenBatches::next(Tensor& inputs, Tensor& targets) {
  const int64_t B = options_.batch, T = options_.context;
  const auto [first, end] = shard_rows(B, options_.shard);
  inputs = empty({end - first, T}, TensorOptions(DType::i64));
  targets = empty({end - first, T}, TensorOptions(DType::i64));
  int64_t* in = inputs.data<int64_t>();
  int64_t* tgt = targets.data<int64_t>();
  for (int64_t b = 0; b < B; ++b) {
    if (b >= first && b < end) fill_sample(sample_at(cursor_), in + (b - first) * T, tgt + (b - first) * T);
    if (++cursor_.index == samples_) {
      ++cursor_.epoch;
      cursor_.index = 0;
    }
  }
}

}  // namespace qkv::data
