// safetensors (https://github.com/huggingface/safetensors): an 8-byte little-endian header
// length, a JSON header {name: {dtype, shape, data_offsets}, "__metadata__": {str: str}}, then
// the raw little-endian bytes. Files written here load in any safetensors reader, and any
// conforming file loads here; malformed files raise IOError naming the file and the field.
#pragma once
#include <cstddef>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace qkv::safetensors {

struct TensorInfo {
  DType dtype;
  Shape shape;
  size_t begin = 0, end = 0;  // byte range in the data section
};

struct Header {
  std::map<std::string, TensorInfo> tensors;
  std::map<std::string, std::string> metadata;
  size_t data_start = 0;  // file offset of the data section
};

using Metadata = std::map<std::string, std::string>;

// Writes tensors (any device, any layout) atomically. Names must be unique and non-empty.
void save(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
          const Metadata& metadata = {});
// Reads and validates the header only.
Header read_header(const std::string& path);
// Loads every tensor onto `device`.
std::map<std::string, Tensor> load(const std::string& path, Device device = kCPU, Metadata* metadata = nullptr);

const char* dtype_code(DType dt);  // "F32", "BF16", ...
DType parse_dtype_code(const std::string& code, const std::string& context);

}  // namespace qkv::safetensors
