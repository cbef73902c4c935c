// What several test files share: the data folder the tests read real datasets from ($QKV_DATA,
// default ../shared/data beside the checkout) and a temporary folder removed at scope exit.
#pragma once
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace qkv::test {

inline std::filesystem::path data_dir() {
  const char* env = std::getenv("QKV_DATA");
  return (env && *env) ? std::filesystem::path(env) : std::filesystem::path(QKV_DEFAULT_DATA_DIR);
}

struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& tag) {
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
};

}  // namespace qkv::test
