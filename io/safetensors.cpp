#include "io/safetensors.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "io/atomic_file.h"
#include "io/input_file.h"
#include "io/json_read.h"
#include "tensor/view.h"

namespace qkv::safetensors {

static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

namespace {

using json = nlohmann::json;
constexpr uint64_t kMaxHeader = 100u << 20;  // the reference implementation's limit

struct CodeName {
  DType dtype;
  const char* code;
};
constexpr CodeName kCodes[] = {{DType::f32, "F32"}, {DType::f64, "F64"}, {DType::bf16, "BF16"},
                               {DType::f16, "F16"}, {DType::i32, "I32"}, {DType::i64, "I64"},
                               {DType::u8, "U8"},   {DType::i8, "I8"},   {DType::b8, "BOOL"}};

[[noreturn]] void bad(const std::string& path, const std::string& what) {
  throw IOError(cat(path, ": not a valid safetensors file: ", what));
}

}  // namespace

const char* dtype_code(DType dt) {
  for (const auto& c : kCodes)
    if (c.dtype == dt) return c.code;
  return "?";
}

DType parse_dtype_code(const std::string& code, const std::string& context) {
  for (const auto& c : kCodes)
    if (code == c.code) return c.dtype;
  throw IOError(
      cat(context, ": unsupported dtype \"", code, "\" (qkvlab reads F32, F64, BF16, F16, I32, I64, U8, I8, BOOL)"));
}

void save(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
          const Metadata& metadata) {
  // Larger elements first, then by name: every tensor starts at a multiple of its element size.
  std::vector<size_t> order(tensors.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::set<std::string> seen;
  for (const auto& [name, t] : tensors) {
    check<ValueError>(!name.empty() && name != "__metadata__", path, ": invalid tensor name '", name, "'");
    check<ValueError>(seen.insert(name).second, path, ": tensor name '", name, "' appears twice");
    check<ValueError>(t.defined(), path, ": tensor '", name, "' is undefined");
  }
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    size_t ea = tensors[a].second.element_size(), eb = tensors[b].second.element_size();
    return ea != eb ? ea > eb : tensors[a].first < tensors[b].first;
  });

  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  size_t pos = 0;
  for (size_t i : order) {
    const auto& [name, t] = tensors[i];
    header[name] = {{"dtype", dtype_code(t.dtype())}, {"shape", t.shape()}, {"data_offsets", {pos, pos + t.nbytes()}}};
    pos += t.nbytes();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // pad so the data section is 8-byte aligned

  write_file_atomically(path, [&](std::ostream& os) {
    uint64_t n = text.size();
    os.write(reinterpret_cast<const char*>(&n), 8);
    os.write(text.data(), std::streamsize(text.size()));
    for (size_t i : order) {
      Tensor host = raw::contiguous(raw::to(tensors[i].second, tensors[i].second.dtype(), kCPU));
      os.write(static_cast<const char*>(host.raw_data()), std::streamsize(host.nbytes()));
    }
  });
}

Header read_header(const std::string& path) {
  const uint64_t file_size = regular_file_size(path, "a safetensors file");
  std::ifstream is(path, std::ios::binary);
  if (!is) throw IOError(cat(path, ": cannot open for reading"));
  if (file_size < 8) bad(path, cat("file is ", file_size, " bytes, shorter than the 8-byte header length"));
  uint64_t n = 0;
  is.read(reinterpret_cast<char*>(&n), 8);
  if (n > kMaxHeader) bad(path, cat("header length ", n, " exceeds the 100 MiB limit"));
  if (8 + n > file_size) bad(path, cat("header length ", n, " runs past the end of the ", file_size, "-byte file"));
  std::string text(n, '\0');
  is.read(text.data(), std::streamsize(n));
  if (!is) bad(path, "could not read the header");
  if (text.empty() || text[0] != '{') bad(path, "header does not start with '{'");

  // Duplicate keys are an error in the spec; nlohmann would silently keep the last one.
  std::string duplicate;
  json header;
  try {
    header = parse_json(text, "header", kMaxJsonDepth, &duplicate);
  } catch (const IOError& e) { bad(path, e.what()); }
  if (!duplicate.empty()) bad(path, cat("tensor '", duplicate, "' appears twice in the header"));
  if (!header.is_object()) bad(path, "header is not a JSON object");

  Header h;
  h.data_start = 8 + n;
  const uint64_t data_size = file_size - h.data_start;
  for (auto& [name, entry] : header.items()) {
    const std::string where = cat(path, ": tensor '", name, "'");
    if (name == "__metadata__") {
      if (!entry.is_object()) bad(path, "__metadata__ must be an object of strings");
      for (auto& [k, v] : entry.items()) {
        if (!v.is_string()) bad(path, cat("__metadata__['", k, "'] must be a string"));
        h.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    if (!entry.is_object()) bad(path, cat("entry '", name, "' must be an object"));
    for (const char* field : {"dtype", "shape", "data_offsets"})
      if (!entry.contains(field)) throw IOError(cat(where, ": missing field \"", field, "\""));
    if (!entry["dtype"].is_string()) throw IOError(cat(where, ": field \"dtype\" must be a string"));
    TensorInfo info;
    info.dtype = parse_dtype_code(entry["dtype"].get<std::string>(), where);
    const json& shape = entry["shape"];
    if (!shape.is_array()) throw IOError(cat(where, ": field \"shape\" must be an array"));
    for (const json& d : shape) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > uint64_t(INT64_MAX))
        throw IOError(cat(where, ": field \"shape\" must hold integers in [0, 2^63), got ", shape.dump()));
      info.shape.push_back(d.get<int64_t>());
    }
    const json& off = entry["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      throw IOError(cat(where, ": field \"data_offsets\" must be [begin, end], got ", off.dump()));
    info.begin = off[0].get<uint64_t>();
    info.end = off[1].get<uint64_t>();
    if (info.begin > info.end || info.end > data_size)
      throw IOError(cat(where, ": data_offsets [", info.begin, ", ", info.end, "] fall outside the ", data_size,
                        "-byte data section (truncated file?)"));
    // The byte count, overflow-checked: a shape whose product passes 2^64 would wrap to a small
    // size and match a small data range.
    const bool no_elements = std::find(info.shape.begin(), info.shape.end(), 0) != info.shape.end();
    uint64_t want = no_elements ? 0 : dtype_size(info.dtype);
    for (int64_t d : info.shape)
      if (!no_elements && __builtin_mul_overflow(want, uint64_t(d), &want))
        throw IOError(cat(where, ": field \"shape\" ", shape_str(info.shape), " of ", dtype_code(info.dtype),
                          " needs more than 2^64 bytes"));
    if (info.end - info.begin != want)
      throw IOError(cat(where, ": data_offsets cover ", info.end - info.begin, " bytes but ", dtype_code(info.dtype),
                        " ", shape_str(info.shape), " needs ", want));
    h.tensors.emplace(name, info);
  }
  // The data section must be covered exactly: no overlaps, no holes.
  std::vector<std::pair<size_t, std::string>> spans;
  for (const auto& [name, info] : h.tensors)
    if (info.end > info.begin) spans.emplace_back(info.begin, name);
  std::sort(spans.begin(), spans.end());
  size_t covered = 0;
  for (const auto& [begin, name] : spans) {
    if (begin != covered)
      bad(path, cat("tensor '", name, "' starts at byte ", begin, " but the previous tensor ends at ", covered,
                    begin < covered ? " (overlap)" : " (hole)"));
    covered = h.tensors.at(name).end;
  }
  if (covered != data_size) bad(path, cat("data section is ", data_size, " bytes but the tensors cover ", covered));
  return h;
}

std::map<std::string, Tensor> load(const std::string& path, Device device, Metadata* metadata) {
  Header h = read_header(path);
  std::ifstream is(path, std::ios::binary);
  if (!is) throw IOError(cat(path, ": cannot open for reading"));
  std::map<std::string, Tensor> out;
  for (const auto& [name, info] : h.tensors) {
    Tensor host = empty(info.shape, {info.dtype, kCPU});
    is.seekg(std::streamoff(h.data_start + info.begin));
    is.read(static_cast<char*>(host.raw_data()), std::streamsize(info.end - info.begin));
    if (!is) throw IOError(cat(path, ": tensor '", name, "': read failed"));
    if (info.dtype == DType::b8) {
      const uint8_t* p = static_cast<const uint8_t*>(host.raw_data());
      for (int64_t i = 0; i < host.numel(); ++i)
        if (p[i] > 1)
          throw IOError(cat(path, ": tensor '", name, "': BOOL byte ", i, " is ", int(p[i]), ", expected 0 or 1"));
    }
    out.emplace(name, raw::to(host, info.dtype, device));
  }
  if (metadata) *metadata = h.metadata;
  return out;
}

}  // namespace qkv::safetensors
