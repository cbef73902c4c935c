// Token shards: the on-disk form of a tokenized corpus. One shard is a 32-byte little-endian
// header and then its tokens as uint16 little-endian:
//
//   offset  size  field
//        0     8  magic        "QKVTOKS\0"
//        8     4  version      1
//       12     4  header_size  32 (tokens start here; readers skip fields they do not know)
//       16     8  token_count  number of tokens
//       24     4  vocab_size   every token is < vocab_size (at most 65536)
//       28     4  reserved     0
//       32  2*N  tokens
//
// Shards are written atomically (a temporary file beside the target, renamed over it), so a
// reader sees a whole shard or none. Reading maps the file and checks every field and token.
#pragma once
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace qkv::data {

inline constexpr char kTokenShardMagic[8] = {'Q', 'K', 'V', 'T', 'O', 'K', 'S', '\0'};
inline constexpr uint32_t kTokenShardVersion = 1;
inline constexpr uint32_t kTokenShardHeaderSize = 32;
inline constexpr int64_t kTokenShardMaxVocab = 65536;

// Writes `tokens` as one shard at `path`, atomically. ValueError when vocab_size is outside
// [1, 65536] or a token is outside [0, vocab_size) (naming its position); IOError when the file
// cannot be written.
void write_token_shard(const std::filesystem::path& path, std::span<const int32_t> tokens, int64_t vocab_size);

// A shard mapped read-only into memory.
class TokenShard {
 public:
  TokenShard() = default;
  TokenShard(TokenShard&& o) noexcept;
  TokenShard& operator=(TokenShard&& o) noexcept;
  TokenShard(const TokenShard&) = delete;
  TokenShard& operator=(const TokenShard&) = delete;
  ~TokenShard();

  const std::filesystem::path& path() const { return path_; }
  int64_t size() const { return size_; }  // token count
  int64_t vocab_size() const { return vocab_size_; }
  const uint16_t* data() const { return tokens_; }
  std::span<const uint16_t> tokens() const { return {tokens_, size_t(size_)}; }
  int32_t operator[](int64_t i) const { return tokens_[i]; }

 private:
  friend TokenShard read_token_shard(const std::filesystem::path& path);
  std::filesystem::path path_;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  const uint16_t* tokens_ = nullptr;
  int64_t size_ = 0, vocab_size_ = 0;
};

// Maps and checks a shard. IOError naming the file and the field for: a missing file, a file
// shorter than the header (truncated), a bad magic, an unknown version, a header size below 32,
// a vocab size outside [1, 65536], a file whose length disagrees with token_count (truncated or
// trailing bytes), and a token >= vocab_size (with its index).
TokenShard read_token_shard(const std::filesystem::path& path);

struct ShardFile {
  std::filesystem::path path;
  int64_t tokens = 0;
};

// Streams tokens into shards `<prefix>_000000.bin`, `<prefix>_000001.bin`, ... of
// `shard_tokens` tokens each (the last one may be shorter). Each shard grows in a temporary file
// and is renamed into place once complete, so a crash never leaves a partial shard under its
// final name. A writer destroyed before finish() removes its temporary file; shards already
// completed stay.
class TokenShardWriter {
 public:
  TokenShardWriter(std::filesystem::path prefix, int64_t vocab_size, int64_t shard_tokens);
  TokenShardWriter(const TokenShardWriter&) = delete;
  TokenShardWriter& operator=(const TokenShardWriter&) = delete;
  ~TokenShardWriter();

  // ValueError for a token outside [0, vocab_size) (nothing of this call is written then).
  void append(std::span<const int32_t> tokens);
  // Completes the last shard (none is written when no token was appended). Idempotent.
  void finish();

  const std::vector<ShardFile>& shards() const { return shards_; }  // completed shards
  int64_t tokens() const { return total_; }                         // appended so far

 private:
  void open_shard();
  void close_shard();
  void write_chunk(std::span<const int32_t> tokens);
  std::filesystem::path prefix_;
  int64_t vocab_, shard_tokens_;
  std::vector<ShardFile> shards_;
  int64_t total_ = 0, in_shard_ = 0;
  std::FILE* file_ = nullptr;
  std::filesystem::path final_path_, temp_path_;
  bool finished_ = false;
};

// The name of shard `index` of a prefix: "<prefix>_000042.bin".
std::filesystem::path token_shard_path(const std::filesystem::path& prefix, int64_t index);

}  // namespace qkv::data
