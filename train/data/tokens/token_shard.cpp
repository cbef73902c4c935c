// Token shards: the header codec, the atomic one-shot writer, the mapped reader with its
// checks, and the rolling TokenShardWriter.
#include "train/data/tokens/token_shard.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "io/atomic_file.h"
#include "io/fault_hook.h"
#include "io/input_file.h"
#include "tensor/error.h"

namespace qkv::data {

namespace fs = std::filesystem;

static_assert(std::endian::native == std::endian::little,
              "token shards are little-endian and read in place: this build assumes a little-endian host");

namespace {

void put32(unsigned char* p, uint32_t v) { std::memcpy(p, &v, 4); }
void put64(unsigned char* p, uint64_t v) { std::memcpy(p, &v, 8); }
uint32_t get32(const unsigned char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
uint64_t get64(const unsigned char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

std::array<unsigned char, kTokenShardHeaderSize> make_header(int64_t count, int64_t vocab) {
  std::array<unsigned char, kTokenShardHeaderSize> h{};
  std::memcpy(h.data(), kTokenShardMagic, 8);
  put32(h.data() + 8, kTokenShardVersion);
  put32(h.data() + 12, kTokenShardHeaderSize);
  put64(h.data() + 16, uint64_t(count));
  put32(h.data() + 24, uint32_t(vocab));
  put32(h.data() + 28, 0);
  return h;
}

void check_vocab(const char* who, int64_t vocab) {
  check<ValueError>(vocab >= 1 && vocab <= kTokenShardMaxVocab, who, ": vocab size ", vocab,
                    " must lie in [1, 65536] (tokens are stored as uint16)");
}

// Converts tokens to uint16, checking each against the vocabulary.
void to_u16(const char* who, std::span<const int32_t> tokens, int64_t vocab, int64_t first_index,
            std::vector<uint16_t>& out) {
  out.resize(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int32_t t = tokens[i];
    check<ValueError>(t >= 0 && t < vocab, who, ": token ", t, " at position ", first_index + int64_t(i),
                      " is outside the vocabulary [0, ", vocab, ")");
    out[i] = uint16_t(t);
  }
}

std::string escaped_magic(const unsigned char* p) {
  std::string s;
  for (int i = 0; i < 8; ++i) {
    const unsigned c = p[i];
    if (c >= 0x20 && c < 0x7F && c != '\\' && c != '"') s += char(c);
    else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      s += buf;
    }
  }
  return "\"" + s + "\"";
}

}  // namespace

fs::path token_shard_path(const fs::path& prefix, int64_t index) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "_%06lld.bin", (long long)index);
  fs::path p = prefix;
  p += buf;
  return p;
}

void write_token_shard(const fs::path& path, std::span<const int32_t> tokens, int64_t vocab_size) {
  check_vocab("write_token_shard", vocab_size);
  std::vector<uint16_t> buf;
  to_u16("write_token_shard", tokens, vocab_size, 0, buf);
  const auto header = make_header(int64_t(tokens.size()), vocab_size);
  write_file_atomically(path.string(), [&](std::ostream& os) {
    os.write(reinterpret_cast<const char*>(header.data()), std::streamsize(header.size()));
    os.write(reinterpret_cast<const char*>(buf.data()), std::streamsize(buf.size() * sizeof(uint16_t)));
  });
}

// ---- reading --------------------------------------------------------------------------------

TokenShard::TokenShard(TokenShard&& o) noexcept { *this = std::move(o); }

TokenShard& TokenShard::operator=(TokenShard&& o) noexcept {
  if (this != &o) {
    if (map_) ::munmap(map_, map_bytes_);
    path_ = std::move(o.path_);
    map_ = std::exchange(o.map_, nullptr);
    map_bytes_ = std::exchange(o.map_bytes_, 0);
    tokens_ = std::exchange(o.tokens_, nullptr);
    size_ = std::exchange(o.size_, 0);
    vocab_size_ = std::exchange(o.vocab_size_, 0);
  }
  return *this;
}

TokenShard::~TokenShard() {
  if (map_) ::munmap(map_, map_bytes_);
}

TokenShard read_token_shard(const fs::path& path) {
  const std::string name = path.string();
  require_regular_file(path, "a token shard");  // before open(2), which would block on a FIFO
  const int fd = ::open(name.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw IOError(cat(name, ": cannot open token shard: ", std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw IOError(cat(name, ": not a regular file"));
  }
  const auto bytes = size_t(st.st_size);
  if (bytes < kTokenShardHeaderSize) {
    ::close(fd);
    throw IOError(
        cat(name, ": truncated token shard: the header needs ", kTokenShardHeaderSize, " bytes, the file has ", bytes));
  }
  void* map = ::mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) throw IOError(cat(name, ": cannot map token shard: ", std::strerror(errno)));
  TokenShard s;  // owns the mapping from here on, so every throw below unmaps it
  s.path_ = path;
  s.map_ = map;
  s.map_bytes_ = bytes;
  const auto* h = static_cast<const unsigned char*>(map);
  check<IOError>(std::memcmp(h, kTokenShardMagic, 8) == 0, name, ": bad magic ", escaped_magic(h),
                 ": expected \"QKVTOKS\\x00\" (not a qkvlab token shard)");
  const uint32_t version = get32(h + 8), header_size = get32(h + 12), vocab = get32(h + 24);
  const uint64_t count = get64(h + 16);
  check<IOError>(version == kTokenShardVersion, name, ": unknown version ", version,
                 " (field version): this build reads ", "version ", kTokenShardVersion);
  check<IOError>(header_size >= kTokenShardHeaderSize && header_size <= bytes, name, ": header size ", header_size,
                 " (field header_size) must lie in [", kTokenShardHeaderSize, ", file size ", bytes, "]");
  check<IOError>(header_size % 2 == 0, name, ": header size ", header_size, " (field header_size) must be even");
  check<IOError>(vocab >= 1 && vocab <= kTokenShardMaxVocab, name, ": vocab size ", vocab,
                 " (field vocab_size) must lie in [1, 65536]");
  const uint64_t payload = bytes - header_size;
  check<IOError>(count <= payload / 2, name, ": truncated token shard: the header says ", count,
                 " tokens (field token_count, ", count * 2, " bytes) but only ", payload, " bytes follow the header");
  check<IOError>(count * 2 == payload, name, ": ", payload - count * 2, " trailing bytes after the ", count,
                 " tokens the header announces (field token_count)");
  s.tokens_ = reinterpret_cast<const uint16_t*>(h + header_size);
  s.size_ = int64_t(count);
  s.vocab_size_ = vocab;
  // Every token must be in the vocabulary: scan in blocks, report the first offender.
  const uint16_t* t = s.tokens_;
  for (int64_t i = 0; i < s.size_;) {
    const int64_t end = std::min<int64_t>(s.size_, i + 4096);
    uint16_t hi = 0;
    for (int64_t j = i; j < end; ++j) hi = std::max(hi, t[j]);
    if (hi >= vocab) {
      for (int64_t j = i; j < end; ++j)
        check<IOError>(t[j] < vocab, name, ": token ", t[j], " at index ", j, " is >= the vocab size ", vocab,
                       " (field vocab_size)");
    }
    i = end;
  }
  return s;
}

// ---- the rolling writer -----------------------------------------------------------------------

TokenShardWriter::TokenShardWriter(fs::path prefix, int64_t vocab_size, int64_t shard_tokens)
    : prefix_(std::move(prefix)), vocab_(vocab_size), shard_tokens_(shard_tokens) {
  check_vocab("TokenShardWriter", vocab_size);
  check<ValueError>(shard_tokens >= 1, "TokenShardWriter: shard size must be at least 1 token, got ", shard_tokens);
}

TokenShardWriter::~TokenShardWriter() {
  if (file_) {
    std::fclose(file_);
    std::error_code ec;
    fs::remove(temp_path_, ec);
  }
}

void TokenShardWriter::open_shard() {
  final_path_ = token_shard_path(prefix_, int64_t(shards_.size()));
  temp_path_ = temp_file_for(final_path_);  // recognisable, so a killed prepare's leftover is removed
  file_ = std::fopen(temp_path_.c_str(), "wb");
  if (!file_)
    throw IOError(
        cat(final_path_.string(), ": cannot open '", temp_path_.string(), "' for writing: ", std::strerror(errno)));
  const auto header = make_header(0, vocab_);  // the count is filled in when the shard closes
  if (std::fwrite(header.data(), 1, header.size(), file_) != header.size())
    throw IOError(cat(final_path_.string(), ": write failed: ", std::strerror(errno)));
  in_shard_ = 0;
}

void TokenShardWriter::close_shard() {
  const std::string name = final_path_.string();
  const auto header = make_header(in_shard_, vocab_);
  bool ok = std::fflush(file_) == 0 && std::fseek(file_, 0, SEEK_SET) == 0 &&
            std::fwrite(header.data(), 1, header.size(), file_) == header.size() && std::fflush(file_) == 0 &&
            ::fsync(::fileno(file_)) == 0;
  const int err = errno;
  ok = (std::fclose(file_) == 0) && ok;
  file_ = nullptr;
  if (ok) fault_point("prepare-shard", int64_t(shards_.size()));  // testing hook (io/fault_hook.h)
  if (ok) ok = std::rename(temp_path_.c_str(), final_path_.c_str()) == 0;
  if (!ok) {
    std::error_code ec;
    fs::remove(temp_path_, ec);
    throw IOError(cat(name, ": cannot complete token shard: ", std::strerror(err ? err : errno)));
  }
  shards_.push_back({final_path_, in_shard_});
}

void TokenShardWriter::write_chunk(std::span<const int32_t> tokens) {
  std::vector<uint16_t> buf;
  to_u16("TokenShardWriter", tokens, vocab_, total_, buf);
  if (std::fwrite(buf.data(), sizeof(uint16_t), buf.size(), file_) != buf.size())
    throw IOError(cat(final_path_.string(), ": write failed (disk full?): ", std::strerror(errno)));
}

void TokenShardWriter::append(std::span<const int32_t> tokens) {
  check<ValueError>(!finished_, "TokenShardWriter: append after finish()");
  for (size_t i = 0; i < tokens.size(); ++i)  // validate all first: a bad call writes nothing
    check<ValueError>(tokens[i] >= 0 && tokens[i] < vocab_, "TokenShardWriter: token ", tokens[i], " at position ",
                      total_ + int64_t(i), " is outside the vocabulary [0, ", vocab_, ")");
  while (!tokens.empty()) {
    if (!file_) open_shard();
    const size_t take = size_t(std::min<int64_t>(int64_t(tokens.size()), shard_tokens_ - in_shard_));
    write_chunk(tokens.first(take));
    in_shard_ += int64_t(take);
    total_ += int64_t(take);
    tokens = tokens.subspan(take);
    if (in_shard_ == shard_tokens_) close_shard();
  }
}

void TokenShardWriter::finish() {
  if (finished_) return;
  finished_ = true;
  if (file_) close_shard();
}

}  // namespace qkv::data
