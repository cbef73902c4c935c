// Streaming document readers for language-model corpora. A source is a plain text file (the
// whole file is one document) or a JSONL file (one JSON object per line, its "text" string is
// one document), each stored plain, gzip (.gz, through zlib) or zstd (.zst / .zstd, through
// libzstd's streaming API). The kind comes from the file name: *.jsonl / *.ndjson (before any
// compression suffix) are JSONL, everything else is text.
//
// Nothing loads a whole file: a text document arrives in pieces of about `chunk_bytes`, each cut
// where GPT-2's pre-tokenizer would also cut (a single space or newline between two characters
// that are not whitespace), so encoding the pieces one by one gives exactly the ids of the whole
// document. Only text with no such place in 64 MiB (no space or newline between words at all)
// is cut at a character boundary instead. A JSONL document is one line, read whole.
//
// Errors are IOErrors naming the file (and file:line for JSONL): missing file, corrupt or
// truncated compressed data, a malformed line, a line that is not an object, a missing or
// non-string "text".
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

namespace qkv::data {

enum class TextFormat { text, jsonl };
enum class Compression { none, gzip, zstd };

const char* text_format_name(TextFormat f);   // "text", "jsonl"
const char* compression_name(Compression c);  // "none", "gzip", "zstd"

struct TextSourceKind {
  TextFormat format = TextFormat::text;
  Compression compression = Compression::none;
};
// The format and compression a file name implies.
TextSourceKind text_source_kind(const std::filesystem::path& path);

// A byte stream from a file, decompressed on the way.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Reads up to n bytes; returns how many arrived (0 only at the end of the data).
  virtual size_t read(char* dst, size_t n) = 0;
  // Bytes of the file (compressed, as on disk) consumed so far: progress against file_size.
  virtual int64_t consumed() const = 0;
};
std::unique_ptr<ByteSource> open_byte_source(const std::filesystem::path& path, Compression compression);

// A piece of a document: the first piece of each document has starts_document set.
struct TextPiece {
  std::string text;
  bool starts_document = false;
};

class DocumentReader {
 public:
  // Format and compression from the file name (text_source_kind).
  explicit DocumentReader(const std::filesystem::path& path, size_t chunk_bytes = size_t(1) << 20);
  DocumentReader(const std::filesystem::path& path, TextSourceKind kind, size_t chunk_bytes = size_t(1) << 20);

  // The next piece; false at the end of the file.
  bool next(TextPiece& piece);

  const std::filesystem::path& path() const { return path_; }
  TextSourceKind kind() const { return kind_; }
  int64_t documents() const { return documents_; }  // documents started so far
  int64_t consumed() const;                         // file bytes consumed so far
  int64_t line() const { return line_; }            // JSONL: lines read so far

 private:
  bool fill();  // reads more into buffer_; false at the end of the data
  bool next_text(TextPiece& piece);
  bool next_jsonl(TextPiece& piece);
  std::filesystem::path path_;
  TextSourceKind kind_;
  size_t chunk_bytes_;
  std::unique_ptr<ByteSource> source_;
  std::string buffer_;
  size_t begin_ = 0;  // unconsumed data is buffer_[begin_, end)
  bool eof_ = false;
  int64_t documents_ = 0, line_ = 0;
};

// The offset p in `text`, floor <= p <= limit, of the last place where GPT-2's pre-tokenizer is
// sure to start a new pre-token, or 0 when there is none: text[p] is a single ' ' or '\n' with a
// valid UTF-8 character that is not whitespace on either side. No pre-token spans p and none
// looks past it, so text[0, p) and text[p, end) encode to the ids of the whole.
size_t safe_text_cut(std::string_view text, size_t limit, size_t floor = 1);

}  // namespace qkv::data
