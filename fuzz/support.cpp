#include "fuzz/support.h"

#include <cxxabi.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

namespace qkv::fuzz {

namespace fs = std::filesystem;

namespace {

fs::path temp_root() {
  const char* tmp = std::getenv("TMPDIR");
  if (tmp && *tmp) return tmp;
  std::error_code ec;
  if (fs::is_directory("/dev/shm", ec) && ::access("/dev/shm", W_OK) == 0) return "/dev/shm";
  return "/tmp";
}

struct Scratch {
  fs::path root = temp_root() / ("qkv-fuzz-" + std::to_string(::getpid()));
  Scratch() { fs::create_directories(root); }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
};

Scratch& the_scratch() {
  static Scratch scratch;
  return scratch;
}

}  // namespace

const fs::path& scratch() { return the_scratch().root; }

const fs::path& fresh_scratch() {
  const fs::path& root = the_scratch().root;
  for (const auto& entry : fs::directory_iterator(root)) fs::remove_all(entry.path());
  return root;
}

void write_file(const fs::path& path, std::string_view bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  if (!out) {
    std::fprintf(stderr, "fuzz: cannot write %s (the harness, not the reader)\n", path.c_str());
    std::abort();
  }
}

std::vector<std::string_view> split_parts(std::string_view input, size_t max_parts) {
  std::vector<std::string_view> parts;
  while (parts.size() + 1 < max_parts) {
    const size_t nul = input.find('\0');
    if (nul == std::string_view::npos) break;
    parts.push_back(input.substr(0, nul));
    input.remove_prefix(nul + 1);
  }
  parts.push_back(input);
  parts.resize(max_parts);
  return parts;
}

void report_escape(const char* mangled_type, const char* what) {
  int status = 0;
  char* type = abi::__cxa_demangle(mangled_type, nullptr, nullptr, &status);
  std::fprintf(stderr, "fuzz: an exception that is not a qkv::Error escaped the reader: %s: %s\n",
               type ? type : mangled_type, what);
  std::abort();
}

}  // namespace qkv::fuzz
