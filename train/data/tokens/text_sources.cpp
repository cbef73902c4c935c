// Document readers: byte sources (plain, gzip via zlib, zstd via libzstd's streaming API), the
// text reader that cuts a document into tokenizer-safe pieces, and the JSONL line reader.
#include "train/data/tokens/text_sources.h"

#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <vector>

#include "io/input_file.h"
#include "io/json_read.h"
#include "tensor/error.h"
#include "train/data/tokens/utf8.h"

namespace qkv::data {

namespace fs = std::filesystem;

namespace {

constexpr size_t kReadBytes = size_t(1) << 20;  // one fill() of the buffer
constexpr size_t kMaxPiece = size_t(64) << 20;  // a text piece with no safe cut is cut here
constexpr size_t kMaxLine = size_t(512) << 20;  // longest JSONL line accepted

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

class PlainSource : public ByteSource {
 public:
  explicit PlainSource(const fs::path& path) : name_(path.string()), file_(std::fopen(name_.c_str(), "rb")) {
    if (!file_) throw IOError(cat(name_, ": cannot open: ", std::strerror(errno)));
  }
  ~PlainSource() override { std::fclose(file_); }
  size_t read(char* dst, size_t n) override {
    const size_t got = std::fread(dst, 1, n, file_);
    if (got == 0 && std::ferror(file_)) throw IOError(cat(name_, ": read failed: ", std::strerror(errno)));
    consumed_ += int64_t(got);
    return got;
  }
  int64_t consumed() const override { return consumed_; }

 private:
  std::string name_;
  std::FILE* file_;
  int64_t consumed_ = 0;
};

class GzipSource : public ByteSource {
 public:
  explicit GzipSource(const fs::path& path) : name_(path.string()) {
    // gzopen would create nothing in "rb" mode, but report a missing file clearly first.
    std::FILE* probe = std::fopen(name_.c_str(), "rb");
    if (!probe) throw IOError(cat(name_, ": cannot open: ", std::strerror(errno)));
    std::fclose(probe);
    file_ = gzopen(name_.c_str(), "rb");
    if (!file_) throw IOError(cat(name_, ": cannot open as gzip"));
    gzbuffer(file_, 1 << 17);
  }
  ~GzipSource() override { gzclose(file_); }
  size_t read(char* dst, size_t n) override {
    const int r = gzread(file_, dst, unsigned(std::min<size_t>(n, size_t(1) << 30)));
    int code = Z_OK;
    const char* msg = gzerror(file_, &code);
    if (r < 0 || (code != Z_OK && code != Z_STREAM_END))
      throw IOError(cat(name_, ": corrupt or truncated gzip data: ", msg ? msg : "unknown zlib error"));
    return size_t(r);
  }
  int64_t consumed() const override { return int64_t(gzoffset(file_)); }

 private:
  std::string name_;
  gzFile file_ = nullptr;
};

class ZstdSource : public ByteSource {
 public:
  explicit ZstdSource(const fs::path& path)
      : name_(path.string()), file_(std::fopen(name_.c_str(), "rb")), in_buf_(ZSTD_DStreamInSize()) {
    if (!file_) throw IOError(cat(name_, ": cannot open: ", std::strerror(errno)));
    dctx_ = ZSTD_createDCtx();
    if (!dctx_) {
      std::fclose(file_);
      throw OutOfMemory(cat(name_, ": cannot create a zstd decompression context"));
    }
  }
  ~ZstdSource() override {
    ZSTD_freeDCtx(dctx_);
    std::fclose(file_);
  }
  size_t read(char* dst, size_t n) override {
    ZSTD_outBuffer out{dst, n, 0};
    for (;;) {
      if (in_.pos == in_.size && !eof_) {
        const size_t got = std::fread(in_buf_.data(), 1, in_buf_.size(), file_);
        if (got == 0 && std::ferror(file_)) throw IOError(cat(name_, ": read failed: ", std::strerror(errno)));
        if (got == 0) eof_ = true;
        in_ = ZSTD_inBuffer{in_buf_.data(), got, 0};
        consumed_ += int64_t(got);
      }
      if (in_.pos == in_.size && eof_ && !maybe_buffered_) {
        // 0 from the last call that made progress: the data ended with a complete frame.
        check<IOError>(last_ret_ == 0, name_, ": truncated zstd data: the file ends inside a frame");
        return 0;
      }
      const size_t in_before = in_.pos;
      const size_t r = ZSTD_decompressStream(dctx_, &out, &in_);
      if (ZSTD_isError(r)) throw IOError(cat(name_, ": corrupt zstd data: ", ZSTD_getErrorName(r)));
      if (in_.pos > in_before || out.pos > 0) last_ret_ = r;
      maybe_buffered_ = out.pos == out.size;  // a full output buffer may leave output inside zstd
      if (out.pos > 0) return out.pos;
    }
  }
  int64_t consumed() const override { return consumed_; }

 private:
  std::string name_;
  std::FILE* file_;
  ZSTD_DCtx* dctx_ = nullptr;
  std::vector<char> in_buf_;
  ZSTD_inBuffer in_{nullptr, 0, 0};
  bool eof_ = false, maybe_buffered_ = false;
  size_t last_ret_ = 1;  // an empty file is not a complete frame
  int64_t consumed_ = 0;
};

// Python's \s (Unicode White_Space), which the tokenizer's pattern reproduces.
bool is_space(char32_t c) {
  return (c >= 9 && c <= 13) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
         c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// Whether a valid, non-space character starts at text[i].
bool solid_at(std::string_view text, size_t i) {
  char32_t cp = 0;
  return i < text.size() && decode_utf8_at(text, i, cp) > 0 && !is_space(cp);
}

// Whether a valid, non-space character ends just before text[p].
bool solid_before(std::string_view text, size_t p) {
  for (size_t k = 1; k <= 4 && k <= p; ++k) {
    if ((static_cast<unsigned char>(text[p - k]) & 0xC0) == 0x80) continue;  // a continuation byte
    char32_t cp = 0;
    return decode_utf8_at(text, p - k, cp) == k && !is_space(cp);
  }
  return false;
}

// Whether a pre-token surely starts at text[p] (see safe_text_cut).
bool safe_at(std::string_view text, size_t p) {
  return p >= 1 && p + 1 < text.size() && (text[p] == ' ' || text[p] == '\n') && solid_before(text, p) &&
         solid_at(text, p + 1);
}

// The first safe cut at or after `from`, or 0.
size_t first_safe_cut(std::string_view text, size_t from) {
  for (size_t p = std::max<size_t>(from, 1); p + 1 < text.size(); ++p)
    if (safe_at(text, p)) return p;
  return 0;
}

}  // namespace

const char* text_format_name(TextFormat f) { return f == TextFormat::jsonl ? "jsonl" : "text"; }

const char* compression_name(Compression c) {
  switch (c) {
    case Compression::gzip: return "gzip";
    case Compression::zstd: return "zstd";
    default: return "none";
  }
}

TextSourceKind text_source_kind(const fs::path& path) {
  std::string name = lower(path.filename().string());
  TextSourceKind k;
  if (ends_with(name, ".gz")) {
    k.compression = Compression::gzip;
    name.resize(name.size() - 3);
  } else if (ends_with(name, ".zst")) {
    k.compression = Compression::zstd;
    name.resize(name.size() - 4);
  } else if (ends_with(name, ".zstd")) {
    k.compression = Compression::zstd;
    name.resize(name.size() - 5);
  }
  if (ends_with(name, ".jsonl") || ends_with(name, ".ndjson")) k.format = TextFormat::jsonl;
  return k;
}

std::unique_ptr<ByteSource> open_byte_source(const fs::path& path, Compression compression) {
  require_regular_file(path, "a text corpus");
  switch (compression) {
    case Compression::gzip: return std::make_unique<GzipSource>(path);
    case Compression::zstd: return std::make_unique<ZstdSource>(path);
    default: return std::make_unique<PlainSource>(path);
  }
}

size_t safe_text_cut(std::string_view text, size_t limit, size_t floor) {
  limit = std::min(limit, text.size() >= 2 ? text.size() - 2 : 0);
  for (size_t p = limit; p >= std::max<size_t>(floor, 1); --p)
    if (safe_at(text, p)) return p;
  return 0;
}

DocumentReader::DocumentReader(const fs::path& path, size_t chunk_bytes)
    : DocumentReader(path, text_source_kind(path), chunk_bytes) {}

DocumentReader::DocumentReader(const fs::path& path, TextSourceKind kind, size_t chunk_bytes)
    : path_(path),
      kind_(kind),
      chunk_bytes_(std::clamp<size_t>(chunk_bytes, 64, kMaxPiece)),
      source_(open_byte_source(path, kind.compression)) {}

int64_t DocumentReader::consumed() const { return source_->consumed(); }

bool DocumentReader::fill() {
  if (eof_) return false;
  if (begin_ > 0 && begin_ >= buffer_.size() / 2) {
    buffer_.erase(0, begin_);
    begin_ = 0;
  }
  const size_t old = buffer_.size();
  buffer_.resize(old + kReadBytes);
  const size_t got = source_->read(buffer_.data() + old, kReadBytes);
  buffer_.resize(old + got);
  if (got == 0) eof_ = true;
  return got > 0;
}

bool DocumentReader::next(TextPiece& piece) {
  return kind_.format == TextFormat::jsonl ? next_jsonl(piece) : next_text(piece);
}

bool DocumentReader::next_text(TextPiece& piece) {
  const bool first = documents_ == 0;
  while (!eof_ && buffer_.size() - begin_ < chunk_bytes_ + 2) fill();
  size_t avail = buffer_.size() - begin_;
  if (avail == 0 && !first) return false;
  size_t take = avail;
  if (!eof_) {
    // Cut at the last safe place within the chunk; with none, at the first one after it, reading
    // on as needed (up to kMaxPiece).
    size_t cut = safe_text_cut(std::string_view(buffer_).substr(begin_), chunk_bytes_), from = chunk_bytes_ + 1;
    while (cut == 0) {
      const std::string_view view = std::string_view(buffer_).substr(begin_);
      cut = first_safe_cut(view, from);
      if (cut > 0 || eof_ || view.size() >= kMaxPiece) break;
      from = view.size() > 2 ? view.size() - 2 : 1;
      fill();
    }
    avail = buffer_.size() - begin_;
    if (cut > 0) take = cut;
    else if (eof_) take = avail;
    else {  // no word boundary in 64 MiB: cut at a UTF-8 character boundary
      take = std::min(avail, kMaxPiece);
      while (take > 1 && (static_cast<unsigned char>(buffer_[begin_ + take]) & 0xC0) == 0x80) --take;
    }
  }
  piece.text.assign(buffer_, begin_, take);
  piece.starts_document = first;
  begin_ += take;
  if (first) documents_ = 1;
  return true;
}

bool DocumentReader::next_jsonl(TextPiece& piece) {
  const std::string name = path_.string();
  for (;;) {
    size_t nl = buffer_.find('\n', begin_);
    while (nl == std::string::npos && !eof_) {
      check<IOError>(buffer_.size() - begin_ <= kMaxLine, name, ":", line_ + 1, ": line longer than ", kMaxLine >> 20,
                     " MiB");
      const size_t scanned = buffer_.size() - begin_;
      fill();
      nl = buffer_.find('\n', begin_ + scanned);
    }
    if (begin_ >= buffer_.size() && eof_) return false;
    const size_t end = nl == std::string::npos ? buffer_.size() : nl;
    std::string_view line = std::string_view(buffer_).substr(begin_, end - begin_);
    ++line_;
    begin_ = nl == std::string::npos ? buffer_.size() : nl + 1;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;  // blank line
    const nlohmann::json j = parse_json(line, cat(name, ":", line_));
    check<IOError>(j.is_object(), name, ":", line_, ": expected a JSON object with a \"text\" string, got ",
                   j.type_name());
    const auto it = j.find("text");
    check<IOError>(it != j.end(), name, ":", line_, ": no \"text\" field (a JSONL document is {\"text\": \"...\"})");
    check<IOError>(it->is_string(), name, ":", line_, ": \"text\" is ", it->type_name(), ", expected a string");
    piece.text = it->get<std::string>();
    piece.starts_document = true;
    ++documents_;
    return true;
  }
}

}  // namespace qkv::data
