// Readers' guards: non-regular files refused before anything blocks on them, JSON nesting
// bounded, wide JSON parsed in linear passes, and an allocation that fails naming what it was for.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <string>

#include "io/input_file.h"
#include "io/json_read.h"
#include "io/safetensors.h"
#include "tensor/alloc_purpose.h"
#include "tensor/tensor.h"
#include "tests/support/error_checks.h"
#include "tests/support/test_support.h"

using namespace qkv;
using test::check_contains;
using test::error_of;
using test::TempDir;

TEST_CASE("input files: FIFOs and folders are refused by name before any read can block") {
  TempDir dir;
  const std::string fifo = dir.file("pipe.json");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  check_contains(error_of<IOError>([&] { regular_file_size(fifo, "a result"); }), {"pipe.json", "FIFO", "a result"});
  check_contains(error_of<IOError>([&] { read_json_file(fifo, "a result"); }), {"pipe.json", "FIFO"});
  check_contains(error_of<IOError>([&] { safetensors::load(fifo); }), {"pipe.json", "FIFO", "safetensors"});
  check_contains(error_of<IOError>([&] { regular_file_size(dir.path, "a shard"); }), {"folder", "a shard"});
  check_contains(error_of<IOError>([&] { regular_file_size(dir.file("none"), "a shard"); }), {"none", "missing"});
  CHECK(regular_file_size(dir.write("five", "12345"), "x") == 5);
  check_contains(error_of<IOError>([&] { check_fits_file("f.idx", "labels", 4294967295u, 12); }),
                 {"f.idx", "4294967295", "12", "truncated"});
}

TEST_CASE("json: nesting is bounded, wide objects parse, duplicates of the outer object are found") {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  check_contains(error_of<IOError>([&] { parse_json(deep, "deep.json"); }), {"deep.json", "nested deeper than 64"});
  const std::string deep_object = "{\"a\":" + std::string(65, '[') + std::string(65, ']') + "}";
  CHECK_THROWS_AS(parse_json(deep_object, "x"), IOError);
  CHECK(parse_json("{\"a\":" + std::string(60, '[') + std::string(60, ']') + "}", "x").is_object());
  check_contains(error_of<IOError>([&] { parse_json("{\"a\": [1,", "cut.json"); }), {"cut.json", "malformed JSON"});

  std::string wide = "{";
  for (int i = 0; i < 50000; ++i) {
    wide += i ? ",\"k" : "\"k";
    wide += std::to_string(i);
    wide += "\":{\"v\":[1,2]}";
  }
  wide += "}";
  std::string duplicate = "?";
  CHECK(parse_json(wide, "wide", kMaxJsonDepth, &duplicate).size() == 50000);
  CHECK(duplicate.empty());
  parse_json(R"({"a":{"b":1,"b":2},"c":1,"c":2,"a":3})", "dup", kMaxJsonDepth, &duplicate);
  CHECK(duplicate == "c");  // the inner object's repeated "b" is not the outer object's
}

TEST_CASE("safetensors: a header nested too deeply is an error naming the file") {
  TempDir dir;
  const std::string header = "{\"__metadata__\":{\"x\":" + std::string(1000, '[') + std::string(1000, ']') + "}}";
  std::string bytes(8, '\0');
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) bytes[size_t(i)] = char((n >> (8 * i)) & 0xff);
  const std::string path = dir.write("deep.safetensors", bytes + header);
  check_contains(error_of<IOError>([&] { safetensors::load(path); }), {"deep.safetensors", "nested deeper"});
}

#if !defined(__SANITIZE_ADDRESS__)  // ASan's allocator reports an impossible size instead of failing
TEST_CASE("allocation: running out of memory names the tensor and what it was for") {
  const std::string message = error_of<OutOfMemory>([] {
    AllocationPurpose purpose("building the model");
    empty({int64_t(1) << 44}, DType::f32);  // 64 TiB
  });
  check_contains(message, {"out of memory", "float32 tensor of shape [17592186044416]", "while building the model"});
  // Outside the scope, no purpose is named.
  CHECK(allocation_purpose_suffix().empty());
}
#endif
