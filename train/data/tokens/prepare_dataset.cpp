// prepare_dataset: text sources -> GPT-2 tokens -> train/val token shards + dataset.json, and
// read_dataset_info for the readers.
//
// The token stream (training inputs, then validation inputs) is first written to a temporary file
// in the output folder (2 bytes a token), because the train/val cut depends on the total, known
// only at the end; a second pass copies it into the shards. Memory stays bounded by one batch of text pieces whatever
// the corpus size.
#include "train/data/tokens/prepare_dataset.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <exception>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>
#include <thread>

#include "io/atomic_file.h"
#include "io/folder_lock.h"
#include "io/json_read.h"
#include "tensor/error.h"
#include "tensor/format.h"
#include "train/data/tokens/bpe.h"
#include "train/data/tokens/text_sources.h"

namespace qkv::data {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// dataset.json lists inputs and shards: a few kB, never near this.
constexpr uint64_t kMaxDatasetJsonBytes = uint64_t(64) << 20;

namespace {

constexpr size_t kBatchBytes = size_t(8) << 20;  // text encoded in parallel per round

// The progress line: a bar over the input bytes on a terminal, one line per input otherwise.
class PrepareProgress {
 public:
  PrepareProgress(std::FILE* out, bool enabled, int64_t total_bytes)
      : out_(out),
        enabled_(enabled && out),
        tty_(out && ::isatty(::fileno(out)) != 0),
        total_(total_bytes),
        start_(Clock::now()),
        last_(start_) {}

  // bytes: of the input files (compressed as on disk); text: decompressed text so far.
  void update(int64_t bytes, int64_t text, int64_t tokens, bool force = false) {
    if (!enabled_ || !tty_) return;
    const auto now = Clock::now();
    if (!force && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    const double t = std::chrono::duration<double>(now - start_).count();
    const double rate = t > 0 ? double(bytes) / t : 0;
    const int width = 24, filled = total_ > 0 ? int(width * std::min<int64_t>(bytes, total_) / total_) : width;
    std::fprintf(out_, "\rdata prepare [%s%s] %.1f/%.1f MB, text %.1f MB/s, %s tokens, ETA %s  ",
                 std::string(size_t(filled), '#').c_str(), std::string(size_t(width - filled), '.').c_str(),
                 double(bytes) / 1e6, double(total_) / 1e6, t > 0 ? double(text) / 1e6 / t : 0.0,
                 with_commas(tokens).c_str(), format_duration(rate > 0 ? double(total_ - bytes) / rate : NAN).c_str());
    std::fflush(out_);
  }
  void line(const std::string& text) {
    if (!enabled_) return;
    std::fprintf(out_, "%s%s\n", tty_ ? "\r\033[K" : "", text.c_str());
    std::fflush(out_);
  }

 private:
  std::FILE* out_;
  bool enabled_, tty_;
  int64_t total_;
  Clock::time_point start_, last_;
};

// The temporary token stream: raw uint16, removed when this goes away.
class StreamFile {
 public:
  explicit StreamFile(fs::path path) : path_(std::move(path)), file_(std::fopen(path_.c_str(), "w+b")) {
    if (!file_) throw IOError(cat(path_.string(), ": cannot create temporary token stream: ", std::strerror(errno)));
  }
  ~StreamFile() {
    std::fclose(file_);
    std::error_code ec;
    fs::remove(path_, ec);
  }
  StreamFile(const StreamFile&) = delete;
  StreamFile& operator=(const StreamFile&) = delete;

  void append(const std::vector<int32_t>& tokens) {
    buf_.resize(tokens.size());
    for (size_t i = 0; i < tokens.size(); ++i) buf_[i] = uint16_t(tokens[i]);
    if (std::fwrite(buf_.data(), 2, buf_.size(), file_) != buf_.size())
      throw IOError(cat(path_.string(), ": write failed (disk full?): ", std::strerror(errno)));
    count_ += int64_t(tokens.size());
  }
  int64_t count() const { return count_; }
  void rewind() {
    if (std::fflush(file_) != 0 || std::fseek(file_, 0, SEEK_SET) != 0)
      throw IOError(cat(path_.string(), ": cannot rewind the temporary token stream: ", std::strerror(errno)));
  }
  // Reads up to n tokens into out; returns how many.
  size_t read(std::vector<int32_t>& out, size_t n) {
    buf_.resize(n);
    const size_t got = std::fread(buf_.data(), 2, n, file_);
    if (got < n && std::ferror(file_)) throw IOError(cat(path_.string(), ": read failed: ", std::strerror(errno)));
    out.assign(buf_.begin(), buf_.begin() + std::ptrdiff_t(got));
    return got;
  }

 private:
  fs::path path_;
  std::FILE* file_;
  std::vector<uint16_t> buf_;
  int64_t count_ = 0;
};

// Encodes pieces[i] into ids[i] on `threads` threads.
void encode_batch(const Gpt2Tokenizer& tok, const std::vector<TextPiece>& pieces,
                  std::vector<std::vector<int32_t>>& ids, int threads) {
  ids.assign(pieces.size(), {});
  std::atomic<size_t> next{0};
  std::exception_ptr failure;
  std::atomic<bool> failed{false};
  auto work = [&] {
    try {
      for (size_t i; (i = next++) < pieces.size() && !failed;) {
        if (pieces[i].starts_document) ids[i].push_back(tok.eot());
        tok.encode_ordinary_into(pieces[i].text, ids[i]);
      }
    } catch (...) {
      if (!failed.exchange(true)) failure = std::current_exception();
    }
  };
  const int n = std::max(1, std::min<int>(threads, int(pieces.size())));
  std::vector<std::thread> pool;
  for (int t = 1; t < n; ++t) pool.emplace_back(work);
  work();
  for (auto& th : pool) th.join();
  if (failure) std::rethrow_exception(failure);
}

int64_t mtime_ns(const fs::path& p) {  // nanoseconds since the Unix epoch
  const auto sys = std::chrono::file_clock::to_sys(fs::last_write_time(p));
  return int64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(sys.time_since_epoch()).count());
}

std::string absolute_name(const fs::path& p) { return fs::absolute(p).lexically_normal().string(); }

// Whether out/dataset.json records exactly this preparation and its shards are all there.
bool already_prepared(const PrepareOptions& o) {
  std::error_code ec;
  if (!fs::exists(o.out / "dataset.json", ec)) return false;
  nlohmann::json j;
  try {
    j = read_json_file(o.out / "dataset.json", "a prepared dataset's dataset.json", kMaxDatasetJsonBytes);
  } catch (const IOError&) {
    return false;  // damaged: prepared again
  }
  try {
    if (!j.is_object() || j.at("tokenizer").at("path") != absolute_name(o.tokenizer) ||
        j.at("val_fraction").get<double>() != o.val_fraction || j.at("shard_tokens").get<int64_t>() != o.shard_tokens ||
        j.value("max_tokens", int64_t(0)) != o.max_tokens || j.value("val_max_tokens", int64_t(0)) != o.val_max_tokens)
      return false;
    auto same_files = [](const nlohmann::json& recorded, const std::vector<fs::path>& files) {
      if (!recorded.is_array() || recorded.size() != files.size()) return false;
      for (size_t i = 0; i < files.size(); ++i) {
        const fs::path& p = files[i];
        if (!fs::is_regular_file(p) || recorded[i].at("path") != absolute_name(p) ||
            recorded[i].at("bytes").get<int64_t>() != int64_t(fs::file_size(p)) ||
            recorded[i].at("mtime_ns").get<int64_t>() != mtime_ns(p))
          return false;
      }
      return true;
    };
    // Folders prepared before validation inputs existed record none.
    if (!same_files(j.at("inputs"), o.inputs) ||
        !same_files(j.contains("val_inputs") ? j.at("val_inputs") : nlohmann::json::array(), o.val_inputs))
      return false;
    for (const auto& [name, split] : j.at("splits").items())
      for (const auto& shard : split.at("shards")) {
        const fs::path f = o.out / shard.at("file").get<std::string>();
        std::error_code ec;
        if (fs::file_size(f, ec) != kTokenShardHeaderSize + 2 * shard.at("tokens").get<uint64_t>() || ec) return false;
      }
  } catch (const nlohmann::json::exception&) {
    return false;  // written by something else: prepare again
  } catch (const fs::filesystem_error&) { return false; }
  return true;
}

nlohmann::ordered_json shards_json(const std::vector<ShardFile>& shards) {
  nlohmann::ordered_json a = nlohmann::ordered_json::array();
  for (const ShardFile& s : shards) a.push_back({{"file", s.path.filename().string()}, {"tokens", s.tokens}});
  return a;
}

}  // namespace

// Prepares o.out; `lock`: takes its lock first (prepare_once holds it already).
static PrepareResult prepare_in_folder(const PrepareOptions& o, std::FILE* log, bool lock) {
  const auto t0 = Clock::now();
  check<ValueError>(!o.inputs.empty(), "data prepare: no input files given");
  check<ValueError>(!o.out.empty(), "data prepare: no output folder given (--out DIR)");
  check<ValueError>(!o.tokenizer.empty(), "data prepare: no tokenizer folder given (--tokenizer DIR)");
  check<ValueError>(o.val_fraction >= 0 && o.val_fraction < 1, "data prepare: --val-fraction ", o.val_fraction,
                    " must lie in [0, 1)");
  check<ValueError>(o.shard_tokens >= 1, "data prepare: --shard-tokens must be at least 1, got ", o.shard_tokens);
  check<ValueError>(o.val_inputs.empty() || o.val_fraction == 0, "data prepare: --val-fraction ", o.val_fraction,
                    " with --val files: the val split is either those files or a fraction cut, not both");
  check<ValueError>(o.max_tokens >= 0 && o.val_max_tokens >= 0, "data prepare: --max-tokens and --val-max-tokens ",
                    "must not be negative, got ", o.max_tokens, " and ", o.val_max_tokens);
  check<ValueError>((o.max_tokens == 0 && o.val_max_tokens == 0) || !o.val_inputs.empty(),
                    "data prepare: --max-tokens and --val-max-tokens budget the train and val splits of --val "
                    "files; without --val the split is a fraction of the stream (--val-fraction)");
  int64_t total_bytes = 0;
  std::set<std::string> train_files;
  for (const fs::path& p : o.inputs) train_files.insert(absolute_name(p));
  for (const auto* list : {&o.inputs, &o.val_inputs})
    for (const fs::path& p : *list) {
      check<IOError>(fs::exists(p), p.string(), ": input file not found");
      check<IOError>(fs::is_regular_file(p), p.string(), ": not a regular file (name the files, not their folder)");
      check<ValueError>(list == &o.inputs || !train_files.count(absolute_name(p)), "data prepare: ", p.string(),
                        " is both a training input and a --val input");
      total_bytes += int64_t(fs::file_size(p));
    }
  const Gpt2Tokenizer tok = Gpt2Tokenizer::load(o.tokenizer);
  check<ValueError>(tok.vocab_size() <= kTokenShardMaxVocab, "data prepare: the tokenizer's ", tok.vocab_size(),
                    " tokens do not fit the shards' uint16 tokens");
  std::error_code ec;
  fs::create_directories(o.out, ec);
  check<IOError>(fs::is_directory(o.out), o.out.string(), ": cannot create the output folder: ", ec.message());
  // One writer at a time; holding the lock, every temporary file in the folder is a leftover of a
  // prepare that was killed.
  std::optional<FolderLock> held;
  if (lock) held.emplace(o.out, "dataset folder");
  for (const fs::path& f : remove_temp_files(o.out, /*recursive=*/false))
    if (log) std::fprintf(log, "data prepare: removed %s, a temporary file an interrupted prepare left\n", f.c_str());

  PrepareResult result;
  PrepareProgress progress(log, o.progress, total_bytes);
  StreamFile stream(temp_file_for(o.out / "tokens"));
  nlohmann::ordered_json inputs = nlohmann::ordered_json::array(), val_inputs = nlohmann::ordered_json::array();
  int64_t bytes_before = 0, train_stream = 0;  // train_stream: tokens of the training inputs
  std::vector<TextPiece> pieces;
  std::vector<std::vector<int32_t>> ids;
  // Whether the split being read has its budget (PrepareOptions::max_tokens) already.
  auto budget_met = [&](bool is_val) {
    const int64_t budget = is_val ? o.val_max_tokens : o.max_tokens;
    return budget > 0 && stream.count() - (is_val ? train_stream : 0) >= budget;
  };
  for (size_t f = 0; f < o.inputs.size() + o.val_inputs.size(); ++f) {
    const bool is_val = f >= o.inputs.size();
    const fs::path& path = is_val ? o.val_inputs[f - o.inputs.size()] : o.inputs[f];
    if (is_val && f == o.inputs.size()) train_stream = stream.count();
    const int64_t tokens_before = stream.count();
    if (budget_met(is_val)) {  // not read: recorded with no documents, so a rerun sees the same files
      bytes_before += int64_t(fs::file_size(path));
      (is_val ? val_inputs : inputs)
          .push_back({{"path", absolute_name(path)},
                      {"mtime_ns", mtime_ns(path)},
                      {"bytes", int64_t(fs::file_size(path))},
                      {"documents", 0},
                      {"tokens", 0}});
      continue;
    }
    DocumentReader reader(path);
    auto flush = [&] {
      encode_batch(tok, pieces, ids, o.threads);
      for (const auto& v : ids) stream.append(v);
      pieces.clear();
      progress.update(bytes_before + reader.consumed(), result.text_bytes, stream.count());
    };
    size_t batch_bytes = 0;
    TextPiece piece;
    while (reader.next(piece)) {
      batch_bytes += piece.text.size();
      result.text_bytes += int64_t(piece.text.size());
      pieces.push_back(std::move(piece));
      piece = TextPiece{};
      if (batch_bytes >= kBatchBytes || pieces.size() >= 4096) {
        flush();
        batch_bytes = 0;
        if (budget_met(is_val)) break;
      }
    }
    flush();
    const int64_t bytes = int64_t(fs::file_size(path)), tokens = stream.count() - tokens_before;
    bytes_before += bytes;
    result.documents += reader.documents();
    const TextSourceKind kind = reader.kind();
    (is_val ? val_inputs : inputs)
        .push_back({{"path", absolute_name(path)},
                    {"mtime_ns", mtime_ns(path)},
                    {"format", text_format_name(kind.format)},
                    {"compression", compression_name(kind.compression)},
                    {"bytes", bytes},
                    {"documents", reader.documents()},
                    {"tokens", tokens}});
    progress.line(cat("data prepare: ", path.string(), is_val ? " (val)" : "", ": ", with_commas(reader.documents()),
                      " document(s), ", with_commas(tokens), " tokens"));
  }
  result.bytes = total_bytes;

  // The cut: after the training inputs when there are validation inputs, else the last
  // val_fraction of the stream is validation.
  // With budgets, the tokens read past one (the rest of its last batch of documents) are dropped:
  // the stream's [train_tokens, train_stream) and [val_end, total).
  const int64_t total = stream.count();
  if (o.val_inputs.empty()) train_stream = total;
  const int64_t train_tokens = o.val_inputs.empty()
                                   ? total - std::min<int64_t>(total, std::llround(double(total) * o.val_fraction))
                                   : (o.max_tokens > 0 ? std::min(train_stream, o.max_tokens) : train_stream);
  const int64_t val_begin = o.val_inputs.empty() ? train_tokens : train_stream;
  const int64_t val_end = o.val_max_tokens > 0 ? std::min(total, train_stream + o.val_max_tokens) : total;
  if (!o.val_inputs.empty())
    check<ValueError>(train_stream < total, "data prepare: the ", o.val_inputs.size(),
                      " --val file(s) hold no documents (the first is ", o.val_inputs[0].string(), ")");
  stream.rewind();
  TokenShardWriter train(o.out / "train", tok.vocab_size(), o.shard_tokens);
  TokenShardWriter val(o.out / "val", tok.vocab_size(), o.shard_tokens);
  std::vector<int32_t> block;
  for (int64_t done = 0; done < total;) {
    const size_t got = stream.read(block, size_t(std::min<int64_t>(total - done, int64_t(1) << 20)));
    check<IOError>(got > 0, "data prepare: the temporary token stream ended early at token ", done, " of ", total);
    // This block's part of [0, train_tokens) and of [val_begin, val_end).
    auto part = [&](int64_t begin, int64_t end) {
      const int64_t b = std::clamp<int64_t>(begin - done, 0, int64_t(got));
      const int64_t e = std::clamp<int64_t>(end - done, b, int64_t(got));
      return std::span<const int32_t>(block).subspan(size_t(b), size_t(e - b));
    };
    train.append(part(0, train_tokens));
    val.append(part(val_begin, val_end));
    done += int64_t(got);
  }
  train.finish();
  val.finish();
  result.train = {train.tokens(), train.shards()};
  result.val = {val.tokens(), val.shards()};

  const nlohmann::ordered_json info = {
      {"format", "qkvlab token shards"},
      {"version", 1},
      {"token_dtype", "uint16"},
      {"tokenizer",
       {{"kind", "gpt2"}, {"path", absolute_name(o.tokenizer)}, {"vocab_size", tok.vocab_size()}, {"eot", tok.eot()}}},
      {"inputs", inputs},
      {"val_inputs", val_inputs},
      {"documents", result.documents},
      {"tokens", total},
      {"val_fraction", o.val_fraction},
      {"shard_tokens", o.shard_tokens},
      {"max_tokens", o.max_tokens},
      {"val_max_tokens", o.val_max_tokens},
      {"splits",
       {{"train", {{"tokens", result.train.tokens}, {"shards", shards_json(result.train.shards)}}},
        {"val", {{"tokens", result.val.tokens}, {"shards", shards_json(result.val.shards)}}}}}};
  write_file_atomically((o.out / "dataset.json").string(), [&](std::ostream& os) { os << info.dump(2) << "\n"; });

  // Shards of an earlier run that this one did not rewrite.
  std::set<std::string> keep;
  for (const auto* split : {&result.train, &result.val})
    for (const ShardFile& s : split->shards) keep.insert(s.path.filename().string());
  static const std::regex shard_name(R"((train|val)_\d{6}\.bin)");
  for (const auto& entry : fs::directory_iterator(o.out)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file() && std::regex_match(name, shard_name) && !keep.count(name))
      fs::remove(entry.path(), ec);
  }

  result.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  progress.update(total_bytes, result.text_bytes, total, true);
  char size[64];
  std::snprintf(size, sizeof size, "%.1f MB of text in %.1f s (%.1f MB/s)", double(result.text_bytes) / 1e6,
                result.seconds, double(result.text_bytes) / 1e6 / std::max(result.seconds, 1e-9));
  progress.line(cat("data prepare: ", o.inputs.size(), " input(s)",
                    o.val_inputs.empty() ? std::string() : cat(" + ", o.val_inputs.size(), " val input(s)"), ", ",
                    with_commas(result.documents), " document(s), ", size, " -> ", with_commas(total),
                    " tokens: train ", with_commas(result.train.tokens), " in ", result.train.shards.size(),
                    " shard(s), val ", with_commas(result.val.tokens), " in ", result.val.shards.size(), " shard(s); ",
                    (o.out / "dataset.json").string()));
  return result;
}

PrepareResult prepare_dataset(const PrepareOptions& o, std::FILE* log) { return prepare_in_folder(o, log, true); }

fs::path prepare_once(const PrepareOptions& o, std::FILE* log) {
  // Runs of one experiment in several processes share the folder: one prepares, the others wait.
  // Even up-to-date data is looked at under the lock: a re-prepare that was killed may have left
  // temporary files beside the intact dataset.json, and only the lock's holder may remove them.
  const FolderLock lock(o.out, "dataset folder", /*wait=*/true, log);
  for (const fs::path& f : remove_temp_files(o.out, /*recursive=*/false))
    if (log) std::fprintf(log, "data prepare: removed %s, a temporary file an interrupted prepare left\n", f.c_str());
  if (already_prepared(o)) {
    if (o.progress && log) std::fprintf(log, "data prepare: %s is up to date\n", o.out.string().c_str());
    return o.out;
  }
  prepare_in_folder(o, log, false);
  return o.out;
}

// ---- reading dataset.json ---------------------------------------------------------------------

const PreparedSplit& DatasetInfo::split(const std::string& name) const {
  std::string known;
  for (const auto& [n, s] : splits) {
    if (n == name) return s;
    known += (known.empty() ? "" : ", ") + n;
  }
  throw ValueError(cat((dir / "dataset.json").string(), ": no split '", name, "' (splits: ", known, ")"));
}

DatasetInfo read_dataset_info(const fs::path& dir) {
  const fs::path path = dir / "dataset.json";
  const std::string name = path.string();
  std::error_code ec;
  check<IOError>(fs::exists(path, ec), name, ": cannot open (is ", dir.string(),
                 " a folder made by `qkvlab data prepare`?)");
  const nlohmann::json j = read_json_file(path, "a prepared dataset's dataset.json", kMaxDatasetJsonBytes);
  auto field = [&](const nlohmann::json& obj, const char* key, const std::string& where) -> const nlohmann::json& {
    check<IOError>(obj.is_object() && obj.contains(key), name, ": missing field ", where, key);
    return obj[key];
  };
  auto integer = [&](const nlohmann::json& v, const std::string& where, int64_t lo, int64_t hi) {
    check<IOError>(v.is_number_integer() && v.get<int64_t>() >= lo && v.get<int64_t>() <= hi, name, ": field ", where,
                   " must be an integer in [", lo, ", ", hi, "], got ", v.dump());
    return v.get<int64_t>();
  };
  DatasetInfo info;
  info.dir = dir;
  check<IOError>(j.is_object(), name, ": expected a JSON object, got ", j.type_name());
  const nlohmann::json& tk = field(j, "tokenizer", "");
  info.vocab_size = integer(field(tk, "vocab_size", "tokenizer."), "tokenizer.vocab_size", 1, kTokenShardMaxVocab);
  info.eot = int32_t(integer(field(tk, "eot", "tokenizer."), "tokenizer.eot", 0, info.vocab_size - 1));
  const nlohmann::json& splits = field(j, "splits", "");
  check<IOError>(splits.is_object(), name, ": field splits must be an object of split name -> {tokens, shards}");
  for (const auto& [split_name, s] : splits.items()) {
    const std::string where = "splits." + split_name + ".";
    PreparedSplit split;
    split.tokens = integer(field(s, "tokens", where), where + "tokens", 0, INT64_MAX);
    const nlohmann::json& shards = field(s, "shards", where);
    check<IOError>(shards.is_array(), name, ": field ", where, "shards must be an array");
    int64_t sum = 0;
    for (size_t i = 0; i < shards.size(); ++i) {
      const std::string at = cat(where, "shards[", i, "].");
      const nlohmann::json& file = field(shards[i], "file", at);
      check<IOError>(file.is_string() && !file.get<std::string>().empty() &&
                         fs::path(file.get<std::string>()).filename() == fs::path(file.get<std::string>()) &&
                         file.get<std::string>() != "..",
                     name, ": field ", at, "file must be a file name inside ", dir.string(), ", got ", file.dump());
      const int64_t tokens = integer(field(shards[i], "tokens", at), at + "tokens", 0, INT64_MAX);
      // Checked before adding, so that the sum of hostile counts cannot overflow.
      check<IOError>(tokens <= split.tokens - sum, name, ": field ", at, "tokens: the shards of split '", split_name,
                     "' hold more than the ", split.tokens, " tokens of its field ", where, "tokens");
      split.shards.push_back({dir / file.get<std::string>(), tokens});
      sum += tokens;
    }
    check<IOError>(sum == split.tokens, name, ": field ", where, "tokens says ", split.tokens, " but its shards hold ",
                   sum);
    info.splits.emplace_back(split_name, std::move(split));
  }
  return info;
}

}  // namespace qkv::data
