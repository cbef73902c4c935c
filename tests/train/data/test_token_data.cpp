// Tests of the language-model data layer's files: token shards (round trip, every corrupt-file
// error, the rolling writer), text sources (text pieces that encode like the whole, JSONL plain /
// gzip / zstd and their errors) and `data prepare` (on files written here and on tiny-shakespeare
// under $QKV_DATA). The batches over them: test_token_batches.cpp.
#include <doctest/doctest.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "tensor/error.h"
#include "tests/support/error_checks.h"
#include "tests/support/gpt2_tokenizer.h"
#include "tests/support/test_support.h"
#include "tests/support/token_data.h"
#include "train/data/tokens/bpe.h"
#include "train/data/tokens/text_sources.h"
#include "train/data/tokens/token_dataset.h"

using namespace qkv;
using namespace qkv::data;
namespace fs = std::filesystem;

namespace {

using test::data_dir;
using test::read_file;
using test::write_file;
using test::TempDir;
using test::check_contains;
using test::error_of;

fs::path tokenizer_dir() { return data_dir() / "gpt2-tokenizer"; }

using test::gpt2;

void write_gzip(const fs::path& p, const std::string& s) {
  gzFile f = gzopen(p.c_str(), "wb");
  REQUIRE(f != nullptr);
  REQUIRE(gzwrite(f, s.data(), unsigned(s.size())) == int(s.size()));
  gzclose(f);
}

std::string zstd_bytes(const std::string& s) {
  std::string out(ZSTD_compressBound(s.size()), '\0');
  const size_t n = ZSTD_compress(out.data(), out.size(), s.data(), s.size(), 3);
  REQUIRE(!ZSTD_isError(n));
  out.resize(n);
  return out;
}

std::vector<int32_t> shard_tokens(const fs::path& p) {
  const TokenShard s = read_token_shard(p);
  return {s.tokens().begin(), s.tokens().end()};
}

}  // namespace

// ---- shards -----------------------------------------------------------------------------------

TEST_CASE("token shards: write and read back") {
  TempDir tmp;
  const std::vector<int32_t> tokens = {0, 1, 50256, 65535 % 50257, 42, 7};
  write_token_shard(tmp.path / "a.bin", tokens, 50257);
  const TokenShard s = read_token_shard(tmp.path / "a.bin");
  CHECK(s.size() == 6);
  CHECK(s.vocab_size() == 50257);
  CHECK(shard_tokens(tmp.path / "a.bin") == tokens);
  CHECK(s[2] == 50256);
  CHECK(fs::file_size(tmp.path / "a.bin") == 32 + 2 * tokens.size());
  CHECK(read_file(tmp.path / "a.bin").substr(0, 8) == std::string("QKVTOKS\0", 8));
  write_token_shard(tmp.path / "empty.bin", {}, 10);
  CHECK(read_token_shard(tmp.path / "empty.bin").size() == 0);
  write_token_shard(tmp.path / "full.bin", std::vector<int32_t>{65535, 0}, 65536);
  CHECK(shard_tokens(tmp.path / "full.bin") == std::vector<int32_t>{65535, 0});
  // Moving a shard keeps the mapping alive.
  TokenShard moved = read_token_shard(tmp.path / "a.bin");
  TokenShard other = std::move(moved);
  CHECK(other.size() == 6);
  CHECK(other[5] == 7);
  // Nothing but the shards is left behind.
  int files = 0;
  for (const auto& e : fs::directory_iterator(tmp.path)) files += e.is_regular_file();
  CHECK(files == 3);
  check_contains(error_of<ValueError>([&] {
                   write_token_shard(tmp.path / "b.bin", std::vector<int32_t>{1, 10}, 10);
                 }),
                 {"token 10", "position 1", "[0, 10)"});
  check_contains(error_of<ValueError>([&] { write_token_shard(tmp.path / "b.bin", std::vector<int32_t>{1}, 70000); }),
                 {"vocab size 70000"});
  CHECK(!fs::exists(tmp.path / "b.bin"));
}

TEST_CASE("token shards: each corrupt file gives an IOError naming the file and the field") {
  TempDir tmp;
  const fs::path good = tmp.path / "good.bin", bad = tmp.path / "bad.bin";
  write_token_shard(good, std::vector<int32_t>{1, 2, 3, 50, 4}, 100);
  const std::string bytes = read_file(good);
  auto corrupt = [&](std::string b) {
    write_file(bad, b);
    return error_of<IOError>([&] { read_token_shard(bad); });
  };
  auto patched = [&](size_t offset, const void* v, size_t n) {
    std::string b = bytes;
    std::memcpy(b.data() + offset, v, n);
    return corrupt(b);
  };
  const std::string name = bad.string();
  check_contains(error_of<IOError>([&] { read_token_shard(tmp.path / "missing.bin"); }),
                 {(tmp.path / "missing.bin").string(), "cannot open"});
  check_contains(corrupt(bytes.substr(0, 10)), {name, "truncated", "header", "10"});
  check_contains(patched(0, "QKVTOKZ", 7), {name, "bad magic", "QKVTOKZ"});
  const uint32_t v2 = 2, h8 = 8, h31 = 31, vocab0 = 0, vocab_big = 70000;
  check_contains(patched(8, &v2, 4), {name, "unknown version 2", "field version"});
  check_contains(patched(12, &h8, 4), {name, "header size 8", "field header_size"});
  check_contains(patched(12, &h31, 4), {name, "field header_size"});
  check_contains(patched(24, &vocab0, 4), {name, "vocab size 0", "field vocab_size"});
  check_contains(patched(24, &vocab_big, 4), {name, "vocab size 70000", "field vocab_size"});
  check_contains(corrupt(bytes.substr(0, bytes.size() - 2)), {name, "truncated", "field token_count", "5 tokens"});
  check_contains(corrupt(bytes.substr(0, bytes.size() - 1)), {name, "truncated", "field token_count"});
  check_contains(corrupt(bytes + "xyz"), {name, "3 trailing bytes", "field token_count"});
  const uint64_t count9 = 9;
  check_contains(patched(16, &count9, 8), {name, "truncated", "9 tokens"});
  const uint16_t t100 = 100;
  check_contains(patched(32 + 2 * 3, &t100, 2), {name, "token 100 at index 3", "vocab size 100", "field vocab_size"});
  const uint32_t vocab50 = 50;  // token 50 at index 3 is now out of range
  check_contains(patched(24, &vocab50, 4), {name, "token 50 at index 3", "field vocab_size"});
  CHECK(read_token_shard(good).size() == 5);
}

TEST_CASE("token shards: the writer rolls over every N tokens") {
  TempDir tmp;
  const fs::path prefix = tmp.path / "train";
  std::vector<int32_t> all;
  {
    TokenShardWriter w(prefix, 1000, 10);
    for (int32_t chunk : {7, 7, 7, 4}) {
      std::vector<int32_t> t;
      for (int32_t i = 0; i < chunk; ++i) t.push_back(int32_t(all.size()) + i);
      w.append(t);
      all.insert(all.end(), t.begin(), t.end());
    }
    CHECK(w.shards().size() == 2);  // the third is still open
    check_contains(error_of<ValueError>([&] {
                     w.append(std::vector<int32_t>{5, 1000});
                   }),
                   {"token 1000", "position 26", "[0, 1000)"});
    CHECK(w.tokens() == 25);
    w.finish();
    w.finish();
    REQUIRE(w.shards().size() == 3);
    CHECK(w.shards()[0].path == tmp.path / "train_000000.bin");
    CHECK(w.shards()[2].path == tmp.path / "train_000002.bin");
    CHECK(w.shards()[2].tokens == 5);
  }
  std::vector<int32_t> back;
  for (int i = 0; i < 3; ++i) {
    const auto t = shard_tokens(token_shard_path(prefix, i));
    CHECK(int64_t(t.size()) == (i < 2 ? 10 : 5));
    back.insert(back.end(), t.begin(), t.end());
  }
  CHECK(back == all);
  int files = 0;
  for (const auto& e : fs::directory_iterator(tmp.path)) files += e.is_regular_file();
  CHECK(files == 3);

  // Abandoned before finish(): completed shards stay, the open one's temporary file goes.
  {
    TokenShardWriter w(tmp.path / "val", 1000, 4);
    w.append(std::vector<int32_t>{1, 2, 3, 4, 5, 6});
  }
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(tmp.path)) names.insert(e.path().filename().string());
  CHECK(names == std::set<std::string>{"train_000000.bin", "train_000001.bin", "train_000002.bin", "val_000000.bin"});
  CHECK(error_of<ValueError>([&] { TokenShardWriter(prefix, 10, 0); }).find("at least 1") != std::string::npos);
}

// ---- text sources -----------------------------------------------------------------------------

TEST_CASE("text sources: format and compression from the file name") {
  CHECK(text_source_kind("a.txt").format == TextFormat::text);
  CHECK(text_source_kind("a.txt").compression == Compression::none);
  CHECK(text_source_kind("a.jsonl").format == TextFormat::jsonl);
  CHECK(text_source_kind("dir/a.JSONL.GZ").format == TextFormat::jsonl);
  CHECK(text_source_kind("a.jsonl.gz").compression == Compression::gzip);
  CHECK(text_source_kind("a.jsonl.zst").compression == Compression::zstd);
  CHECK(text_source_kind("a.ndjson.zstd").format == TextFormat::jsonl);
  CHECK(text_source_kind("a.txt.zst").format == TextFormat::text);
  CHECK(text_source_kind("input").format == TextFormat::text);
}

TEST_CASE("text sources: a text document in pieces encodes like the whole" * doctest::test_suite("data")) {
  if (!test::have_data({"gpt2-tokenizer"})) return;
  TempDir tmp;
  const std::string corpus = read_file(fs::path(QKV_SOURCE_DIR) / "tests" / "tokenizer" / "corpus.txt");
  std::string text;
  for (int i = 0; i < 6; ++i) text += corpus + (i % 2 ? "\n" : "  \n\n") + "日本語の文。\n中文。\n";
  write_file(tmp.path / "doc.txt", text);
  write_gzip(tmp.path / "doc.txt.gz", text);
  write_file(tmp.path / "doc.txt.zst", zstd_bytes(text));
  for (const std::string name : {"doc.txt", "doc.txt.gz", "doc.txt.zst"}) {
    for (size_t chunk : {size_t(64), size_t(1000), size_t(1) << 20}) {
      INFO(name, " in pieces of ", chunk);
      DocumentReader r(tmp.path / name, chunk);
      TextPiece p;
      std::string joined;
      std::vector<int32_t> ids;
      int pieces = 0;
      while (r.next(p)) {
        CHECK(p.starts_document == (pieces == 0));
        joined += p.text;
        gpt2().encode_ordinary_into(p.text, ids);
        ++pieces;
      }
      CHECK(joined == text);
      CHECK(ids == gpt2().encode_ordinary(text));
      CHECK(r.documents() == 1);
      CHECK(r.consumed() == int64_t(fs::file_size(tmp.path / name)));
      if (chunk == 64) CHECK(pieces > 50);
    }
  }
  // An empty file is one empty document.
  write_file(tmp.path / "empty.txt", "");
  DocumentReader r(tmp.path / "empty.txt");
  TextPiece p;
  CHECK(r.next(p));
  CHECK(p.starts_document);
  CHECK(p.text.empty());
  CHECK(!r.next(p));
}

TEST_CASE("text sources: safe cuts never split a pre-token") {
  CHECK(safe_text_cut("ab cd", 10) == 2);
  CHECK(safe_text_cut("ab  cd", 10) == 0);  // a run of spaces
  CHECK(safe_text_cut("ab\n\ncd", 10) == 0);
  CHECK(safe_text_cut("ab\ncd", 10) == 2);
  CHECK(safe_text_cut("é\n日", 10) == 2);        // multi-byte neighbours
  CHECK(safe_text_cut("a\xC2\xA0 b", 10) == 0);  // no-break space beside it
  CHECK(safe_text_cut("a \xC2\x85", 10) == 0);   // NEL after it
  CHECK(safe_text_cut("x y z", 2) == 1);
}

TEST_CASE("text sources: JSONL plain, gzip and zstd") {
  TempDir tmp;
  const std::string jsonl =
      "{\"text\": \"first doc\", \"id\": 1}\n\n{\"text\": \"second\\nline <|endoftext|> caf\\u00e9\"}\r\n"
      "   \n{\"meta\": {\"a\": 1}, \"text\": \"\"}\n{\"text\": \"no newline at the end\"}";
  const std::vector<std::string> want = {"first doc", "second\nline <|endoftext|> café", "", "no newline at the end"};
  write_file(tmp.path / "d.jsonl", jsonl);
  write_gzip(tmp.path / "d.jsonl.gz", jsonl);
  write_file(tmp.path / "d.jsonl.zst", zstd_bytes(jsonl));
  for (const std::string name : {"d.jsonl", "d.jsonl.gz", "d.jsonl.zst"}) {
    INFO(name);
    DocumentReader r(tmp.path / name);
    std::vector<std::string> got;
    TextPiece p;
    while (r.next(p)) {
      CHECK(p.starts_document);
      got.push_back(p.text);
    }
    CHECK(got == want);
    CHECK(r.documents() == 4);
    CHECK(r.line() == 6);
  }

  auto jsonl_error = [&](const std::string& content) {
    write_file(tmp.path / "bad.jsonl", content);
    return error_of<IOError>([&] {
      DocumentReader r(tmp.path / "bad.jsonl");
      TextPiece p;
      while (r.next(p)) {}
    });
  };
  const std::string bad = (tmp.path / "bad.jsonl").string();
  check_contains(jsonl_error("{\"text\": \"a\"}\n{\"text\": \"b\"}\n{\"text\": oops}\n"),
                 {bad + ":3", "malformed JSON"});
  check_contains(jsonl_error("{\"text\": \"a\"}\n{\"body\": \"b\"}\n"), {bad + ":2", "no \"text\" field"});
  check_contains(jsonl_error("{\"text\": 12}\n"), {bad + ":1", "\"text\" is number", "expected a string"});
  check_contains(jsonl_error("[\"text\"]\n"), {bad + ":1", "expected a JSON object", "array"});
  check_contains(jsonl_error("{\"text\": \"a\"}\n{\"text\": \"b\""), {bad + ":2", "malformed JSON"});

  // Broken compressed files.
  const std::string gz = read_file(tmp.path / "d.jsonl.gz"), zst = read_file(tmp.path / "d.jsonl.zst");
  auto read_all = [&](const fs::path& p) {
    return error_of<IOError>([&] {
      DocumentReader r(p);
      TextPiece piece;
      while (r.next(piece)) {}
    });
  };
  write_file(tmp.path / "cut.jsonl.gz", gz.substr(0, gz.size() / 2));
  check_contains(read_all(tmp.path / "cut.jsonl.gz"), {(tmp.path / "cut.jsonl.gz").string(), "gzip"});
  write_file(tmp.path / "cut.jsonl.zst", zst.substr(0, zst.size() - 5));
  check_contains(read_all(tmp.path / "cut.jsonl.zst"), {(tmp.path / "cut.jsonl.zst").string(), "truncated zstd"});
  write_file(tmp.path / "junk.jsonl.zst", "this is not zstd at all");
  check_contains(read_all(tmp.path / "junk.jsonl.zst"), {(tmp.path / "junk.jsonl.zst").string(), "zstd"});
  check_contains(read_all(tmp.path / "missing.jsonl"), {(tmp.path / "missing.jsonl").string(), "cannot open"});
  check_contains(read_all(tmp.path / "missing.jsonl.gz"), {(tmp.path / "missing.jsonl.gz").string(), "cannot open"});
  check_contains(read_all(tmp.path / "missing.txt.zst"), {(tmp.path / "missing.txt.zst").string(), "cannot open"});
}

// ---- data prepare -----------------------------------------------------------------------------

TEST_CASE("data prepare: text and JSONL (plain or gzip or zstd) into train/val shards" * doctest::test_suite("data")) {
  if (!test::have_data({"gpt2-tokenizer"})) return;
  TempDir tmp;
  const std::vector<std::string> docs = {"A first document.\nWith two lines.", "second <|endoftext|> doc", "",
                                         "Fourth: café, 日本語, 123."};
  std::string jsonl;
  for (const std::string& d : docs) jsonl += nlohmann::json({{"text", d}}).dump() + "\n";
  write_file(tmp.path / "plain.txt", "Plain text file.\n\nIts own document.\n");
  write_file(tmp.path / "a.jsonl", jsonl);
  write_gzip(tmp.path / "b.jsonl.gz", jsonl);
  write_file(tmp.path / "c.jsonl.zst", zstd_bytes(jsonl));

  PrepareOptions o;
  o.inputs = {tmp.path / "plain.txt", tmp.path / "a.jsonl", tmp.path / "b.jsonl.gz", tmp.path / "c.jsonl.zst"};
  o.out = tmp.path / "out";
  o.tokenizer = tokenizer_dir();
  o.val_fraction = 0.25;
  o.shard_tokens = 16;
  o.progress = false;
  const PrepareResult r = prepare_dataset(o);

  std::vector<int32_t> want;
  auto add_doc = [&](const std::string& d) {
    want.push_back(gpt2().eot());
    gpt2().encode_ordinary_into(d, want);
  };
  add_doc("Plain text file.\n\nIts own document.\n");
  for (int i = 0; i < 3; ++i)
    for (const std::string& d : docs) add_doc(d);
  const int64_t total = int64_t(want.size()), val = std::llround(double(total) * 0.25);
  CHECK(r.documents == 13);
  CHECK(r.train.tokens == total - val);
  CHECK(r.val.tokens == val);
  std::vector<int32_t> got;
  for (const auto* split : {&r.train, &r.val}) {
    for (size_t i = 0; i < split->shards.size(); ++i) {
      const auto t = shard_tokens(split->shards[i].path);
      CHECK(int64_t(t.size()) == split->shards[i].tokens);
      CHECK(int64_t(t.size()) <= 16);
      if (i + 1 < split->shards.size()) CHECK(t.size() == 16);
      got.insert(got.end(), t.begin(), t.end());
    }
  }
  CHECK(got == want);
  CHECK(r.train.shards[0].path == o.out / "train_000000.bin");
  CHECK(r.val.shards[0].path == o.out / "val_000000.bin");

  const nlohmann::json info = nlohmann::json::parse(read_file(o.out / "dataset.json"));
  CHECK(info["documents"] == 13);
  CHECK(info["tokens"] == total);
  CHECK(info["tokenizer"]["vocab_size"] == 50257);
  CHECK(info["tokenizer"]["eot"] == 50256);
  CHECK(info["splits"]["train"]["tokens"] == total - val);
  CHECK(info["splits"]["val"]["shards"].size() == r.val.shards.size());
  CHECK(info["inputs"].size() == 4);
  CHECK(info["inputs"][2]["compression"] == "gzip");
  CHECK(info["inputs"][3]["compression"] == "zstd");
  CHECK(info["inputs"][1]["format"] == "jsonl");
  CHECK(info["inputs"][1]["documents"] == 4);
  const DatasetInfo back = read_dataset_info(o.out);
  CHECK(back.split("train").tokens == total - val);
  check_contains(error_of<ValueError>([&] { back.split("test"); }), {"no split 'test'", "train, val"});

  // prepare_once: up to date, so nothing is rewritten; a changed input prepares again.
  const auto stamp = fs::last_write_time(o.out / "train_000000.bin");
  CHECK(prepare_once(o, nullptr) == o.out);
  CHECK(fs::last_write_time(o.out / "train_000000.bin") == stamp);
  // Again with one input and bigger shards: the stale shards of the first run go.
  o.inputs = {tmp.path / "plain.txt"};
  o.shard_tokens = 1000;
  prepare_once(o, nullptr);
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(o.out)) names.insert(e.path().filename().string());
  // (and the folder's lock file, which stays: flock(2) locks it while a prepare writes)
  CHECK(names == std::set<std::string>{".qkvlab.lock", "dataset.json", "train_000000.bin", "val_000000.bin"});

  // Errors before any work.
  PrepareOptions e = o;
  e.inputs = {tmp.path / "nope.txt"};
  check_contains(error_of<IOError>([&] { prepare_dataset(e); }), {(tmp.path / "nope.txt").string(), "not found"});
  e = o;
  e.val_fraction = 1;
  check_contains(error_of<ValueError>([&] { prepare_dataset(e); }), {"--val-fraction", "[0, 1)"});
  e = o;
  e.inputs = {tmp.path};
  check_contains(error_of<IOError>([&] { prepare_dataset(e); }), {"not a regular file"});
  e = o;
  e.tokenizer = tmp.path / "no-tokenizer";
  check_contains(error_of<IOError>([&] { prepare_dataset(e); }), {"encoder.json"});
  e = o;
  e.inputs = {tmp.path / "a.jsonl"};
  write_file(tmp.path / "a.jsonl", jsonl + "{\"text\": 5}\n");
  check_contains(error_of<IOError>([&] { prepare_dataset(e); }), {(tmp.path / "a.jsonl").string() + ":5"});
}

TEST_CASE("data prepare: tiny-shakespeare is its BPE ids after one end-of-text" * doctest::test_suite("data")) {
  if (!test::have_data({"gpt2-tokenizer", "tinyshakespeare/input.txt"})) return;
  const fs::path input = data_dir() / "tinyshakespeare" / "input.txt";
  REQUIRE_MESSAGE(fs::exists(input), input.string(), " is missing (set QKV_DATA to the data folder)");
  TempDir tmp;
  PrepareOptions o;
  o.inputs = {input};
  o.out = tmp.path;
  o.tokenizer = tokenizer_dir();
  o.progress = false;
  const PrepareResult r = prepare_dataset(o);
  std::vector<int32_t> want = {gpt2().eot()};
  gpt2().encode_ordinary_into(read_file(input), want);
  CHECK(want.size() == 338026);
  CHECK(r.train.tokens == 304223);
  CHECK(r.val.tokens == 33803);
  std::vector<int32_t> got = shard_tokens(r.train.shards.at(0).path);
  const auto v = shard_tokens(r.val.shards.at(0).path);
  got.insert(got.end(), v.begin(), v.end());
  CHECK(got == want);
}
