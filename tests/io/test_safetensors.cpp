#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "autograd/autograd.h"
#include "io/safetensors.h"
#include "tests/support/test_support.h"

using namespace qkv;
namespace fs = std::filesystem;

namespace {

using test::TempDir;

// A safetensors file assembled byte by byte from the format description: 8-byte little-endian
// header length, the JSON header, the data section.
std::string spec_file(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[size_t(i)] = char((n >> (8 * i)) & 0xff);
  return out + header + data;
}

template <class T> std::string bytes_of(std::initializer_list<T> values) {
  std::string s;
  for (T v : values) s.append(reinterpret_cast<const char*>(&v), sizeof(T));
  return s;
}

void write(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
}

std::string read(const std::string& path) {
  std::ifstream is(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(is), {});
}

}  // namespace

TEST_CASE("a file written by hand from the spec loads") {
  TempDir dir;
  const std::string header =
      R"({"__metadata__":{"format":"pt"},"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},)"
      R"("ids":{"dtype":"I64","shape":[2],"data_offsets":[16,32]},"h":{"dtype":"BF16","shape":[1],"data_offsets":[32,34]},)"
      R"("s":{"dtype":"F64","shape":[],"data_offsets":[34,42]}}   )";
  const std::string data = bytes_of<float>({1, 2, 3, 4}) + bytes_of<int64_t>({7, -9}) + bytes_of<uint16_t>({0x3fc0}) +
                           bytes_of<double>({0.125});
  write(dir.file("hand.safetensors"), spec_file(header, data));
  safetensors::Metadata meta;
  auto t = safetensors::load(dir.file("hand.safetensors"), kCPU, &meta);
  CHECK(meta.at("format") == "pt");
  CHECK(t.at("w").shape() == Shape{2, 2});
  CHECK(t.at("w").to_vector<float>() == std::vector<float>{1, 2, 3, 4});
  CHECK(t.at("ids").to_vector<int64_t>() == std::vector<int64_t>{7, -9});
  CHECK(t.at("h").dtype() == DType::bf16);
  CHECK(t.at("h").item<float>() == 1.5f);
  CHECK(t.at("s").dim() == 0);
  CHECK(t.at("s").item<double>() == 0.125);
}

TEST_CASE("a file written by qkvlab is laid out as the spec says") {
  TempDir dir;
  Tensor a = arange(0, 6, 1, DType::f32).reshape({2, 3}).transpose(0, 1);  // saved contiguous
  Tensor b = from_vector<bool>({true, false, true});
  Tensor c = from_vector<double>({2.5});
  safetensors::save(dir.file("out.safetensors"), {{"a", a}, {"flags", b}, {"c", c}}, {{"step", "10"}});
  const std::string bytes = read(dir.file("out.safetensors"));
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  REQUIRE(8 + n <= bytes.size());
  CHECK((8 + n) % 8 == 0);  // data section aligned
  auto header = nlohmann::json::parse(bytes.substr(8, n));
  CHECK(header["__metadata__"]["step"] == "10");
  CHECK(header["a"]["dtype"] == "F32");
  CHECK(header["a"]["shape"] == nlohmann::json::array({3, 2}));
  auto read_span = [&](const std::string& name) {
    auto off = header[name]["data_offsets"];
    return bytes.substr(8 + n + off[0].get<size_t>(), off[1].get<size_t>() - off[0].get<size_t>());
  };
  CHECK(read_span("a") == bytes_of<float>({0, 3, 1, 4, 2, 5}));
  CHECK(read_span("flags") == std::string("\x01\x00\x01", 3));
  CHECK(read_span("c") == bytes_of<double>({2.5}));
  CHECK(header["c"]["data_offsets"][0].get<size_t>() % 8 == 0);  // 8-byte elements first

  auto back = safetensors::load(dir.file("out.safetensors"));
  CHECK(back.at("a").to_vector<float>() == a.to_vector<float>());
  CHECK(back.at("flags").to_vector<bool>() == std::vector<bool>{true, false, true});
  CHECK(!fs::exists(dir.file("out.safetensors") + ".tmp." + std::to_string(::getpid())));
}

TEST_CASE("every dtype round-trips") {
  TempDir dir;
  std::vector<std::pair<std::string, Tensor>> all;
  for (DType dt : {DType::f32, DType::f64, DType::bf16, DType::f16, DType::i32, DType::i64, DType::u8, DType::b8})
    all.emplace_back(dtype_name(dt), arange(0, 5, 1, dt));
  safetensors::save(dir.file("all.safetensors"), all);
  auto back = safetensors::load(dir.file("all.safetensors"));
  for (const auto& [name, t] : all) {
    CHECK(back.at(name).dtype() == t.dtype());
    CHECK(back.at(name).to_vector<double>() == t.to_vector<double>());
  }
}

TEST_CASE("malformed files are rejected with the file, the tensor and the field") {
  TempDir dir;
  const std::string path = dir.file("bad.safetensors");
  auto expect = [&](const std::string& bytes, const std::string& message) {
    write(path, bytes);
    CHECK_THROWS_WITH_AS(safetensors::load(path), doctest::Contains(message.c_str()), IOError);
  };
  const std::string four_floats = bytes_of<float>({1, 2, 3, 4});
  expect("abc", "shorter than the 8-byte header length");
  expect(spec_file(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", four_floats).substr(0, 40),
         "runs past the end");
  expect(spec_file(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", four_floats.substr(0, 8)),
         "fall outside the 8-byte data section");
  expect(spec_file(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]})", four_floats), "malformed JSON");
  expect(spec_file(R"({"w":{"dtype":"Q8","shape":[4],"data_offsets":[0,16]}})", four_floats),
         "unsupported dtype \"Q8\"");
  expect(spec_file(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,16]}})", four_floats), "needs 12");
  expect(spec_file(R"({"w":{"dtype":"F32","shape":[4]}})", four_floats), "missing field \"data_offsets\"");
  expect(spec_file(R"({"w":{"dtype":"F32","shape":[-4],"data_offsets":[0,16]}})", four_floats),
         "integers in [0, 2^63)");
  expect(
      spec_file(
          R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"v":{"dtype":"F32","shape":[1],"data_offsets":[12,16]}})",
          four_floats),
      "(hole)");
  expect(
      spec_file(
          R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"v":{"dtype":"F32","shape":[3],"data_offsets":[4,16]}})",
          four_floats),
      "(overlap)");
  expect(
      spec_file(
          R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"w":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
          four_floats),
      "appears twice");
  expect(spec_file(R"({"w":{"dtype":"BOOL","shape":[4],"data_offsets":[0,4]}})", std::string("\x01\x02\x00\x01", 4)),
         "expected 0 or 1");
  expect(spec_file(R"([1, 2])", ""), "does not start with '{'");
  CHECK_THROWS_WITH_AS(safetensors::load(dir.file("missing.safetensors")), doctest::Contains("cannot open"), IOError);
}

TEST_CASE("saving refuses bad names and missing directories") {
  TempDir dir;
  Tensor t = ones({2});
  CHECK_THROWS_WITH_AS(safetensors::save(dir.file("x.safetensors"), {{"a", t}, {"a", t}}),
                       doctest::Contains("appears twice"), ValueError);
  CHECK_THROWS_WITH_AS(safetensors::save(dir.file("no/such/dir/x.safetensors"), {{"a", t}}),
                       doctest::Contains("does not exist"), IOError);
}
