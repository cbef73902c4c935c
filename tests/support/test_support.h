// What the test files share: the data folder the tests read real datasets from ($QKV_DATA,
// default ../shared/data beside the checkout), a temporary folder removed at scope exit, and
// whole-file reads and writes.
#pragma once
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace qkv::test {

inline std::filesystem::path data_dir() {
  const char* env = std::getenv("QKV_DATA");
  return (env && *env) ? std::filesystem::path(env) : std::filesystem::path(QKV_DEFAULT_DATA_DIR);
}

inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void write_file(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary);
  out << bytes;
}

// A fresh, empty folder under the system's temporary directory, unique per process and object.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& tag = "test") {
    static std::atomic<int> counter{0};
    path = std::filesystem::temp_directory_path() /
           ("qkvlab-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (path / name).string(); }
  // Writes `text` to a file in the folder and returns its path.
  std::string write(const std::string& name, const std::string& text) const {
    write_file(path / name, text);
    return file(name);
  }
};

}  // namespace qkv::test
