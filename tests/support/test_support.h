// What the test files share: the data folder the tests read real datasets from ($QKV_DATA,
// default ../shared/data beside the checkout) and the check that skips a test whose data is
// absent, a temporary folder removed at scope exit, and whole-file reads and writes.
//
// A test that reads real data is in the doctest suite "data" (CTest label `data`) and starts
// with `if (!test::have_data({"mnist"})) return;`: without the data it prints why and CTest
// reports it skipped (SKIP_REGULAR_EXPRESSION in tests/CMakeLists.txt). Its name has no comma or
// semicolon: doctest's CTest labelling looks a test up by name and splits it at both.
#pragma once
#include <doctest/doctest.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <sstream>
#include <string>

namespace qkv::test {

inline std::filesystem::path data_dir() {
  const char* env = std::getenv("QKV_DATA");
  return (env && *env) ? std::filesystem::path(env) : std::filesystem::path(QKV_DEFAULT_DATA_DIR);
}

// The line CTest recognizes as "skipped" (tests/CMakeLists.txt).
inline constexpr const char* kSkipped = "qkvlab-test-skipped: ";

// Says why the running test stops here, on the line CTest reads (doctest shows MESSAGE only
// for failures).
inline void skip(const char* why) {
  std::printf("%s%s\n", kSkipped, why);
  std::fflush(stdout);
}

// True when every path exists under data_dir(); otherwise prints the skip line naming the
// first missing one and returns false.
inline bool have_data(std::initializer_list<const char*> paths) {
  for (const char* p : paths)
    if (!std::filesystem::exists(data_dir() / p)) {
      skip(("needs " + (data_dir() / p).string() +
            " (the real-data tests read $QKV_DATA, default ../shared/data beside the checkout)")
               .c_str());
      return false;
    }
  return true;
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

// What `f` writes to the stream it is given (a log or console stand-in).
inline std::string captured(const std::function<void(std::FILE*)>& f) {
  std::FILE* log = std::tmpfile();
  f(log);
  std::rewind(log);
  std::string text;
  for (int c; (c = std::fgetc(log)) != EOF;) text += char(c);
  std::fclose(log);
  return text;
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
