#include "io/atomic_file.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <regex>

#include "io/fault_hook.h"
#include "tensor/error.h"

namespace qkv {

namespace fs = std::filesystem;

fs::path temp_file_for(const fs::path& path) {
  // The pid tells whose file it is; the random part keeps two writers of one process apart.
  static std::atomic<uint32_t> counter{std::random_device{}()};
  char suffix[16];
  std::snprintf(suffix, sizeof suffix, "%08x", unsigned(counter.fetch_add(0x9e3779b9u)));
  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path();
  return dir / cat(".", path.filename().string(), ".tmp.", ::getpid(), ".", suffix);
}

namespace {
const std::regex& temp_pattern() {
  // Today's name; then an earlier version's atomic writes and its data prepare's token stream.
  static const std::regex re(R"(\..+\.tmp\.(\d+)\.[0-9a-f]{8}|.+\.tmp\.(\d+)|\.tokens\.(\d+)\.tmp)");
  return re;
}
}  // namespace

bool is_temp_file_name(const std::string& filename) { return std::regex_match(filename, temp_pattern()); }

std::vector<fs::path> remove_temp_files(const fs::path& dir, bool recursive) {
  std::vector<fs::path> removed;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return removed;
  auto consider = [&](const fs::directory_entry& e) {
    std::smatch m;
    const std::string name = e.path().filename().string();
    if (!e.is_regular_file(ec) || !std::regex_match(name, m, temp_pattern())) return;
    const std::string pid = m[1].matched ? m[1].str() : m[2].matched ? m[2].str() : m[3].str();
    if (pid == std::to_string(::getpid())) return;  // one of ours, being written
    if (fs::remove(e.path(), ec)) removed.push_back(e.path());
  };
  if (recursive) {
    for (const auto& e : fs::recursive_directory_iterator(dir, fs::directory_options::skip_permission_denied, ec))
      consider(e);
  } else {
    for (const auto& e : fs::directory_iterator(dir, ec)) consider(e);
  }
  return removed;
}

void remove_dead_temp_files_for(const fs::path& path) {
  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  const std::string prefix = cat(".", path.filename().string(), ".tmp.");
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (!name.starts_with(prefix) || !std::regex_match(name, temp_pattern()) || !e.is_regular_file(ec)) continue;
    const long pid = std::strtol(name.c_str() + prefix.size(), nullptr, 10);
    if (pid > 0 && ::kill(pid_t(pid), 0) != 0 && errno == ESRCH) fs::remove(e.path(), ec);
  }
}

void write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& write) {
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw IOError(cat(path, ": cannot write: directory '", dir.string(), "' does not exist"));
  remove_dead_temp_files_for(target);
  const std::string tmp = temp_file_for(target).string();
  try {
    {
      std::ofstream os(tmp, std::ios::binary | std::ios::trunc);
      if (!os) throw IOError(cat(path, ": cannot open '", tmp, "' for writing: ", std::strerror(errno)));
      write(os);
      os.flush();
      if (!os) throw IOError(cat(path, ": write failed (disk full?)"));
    }
    int fd = ::open(tmp.c_str(), O_RDONLY);
    if (fd >= 0) {
      ::fsync(fd);
      ::close(fd);
    }
    fault_point_in_write();  // testing hook: a kill here leaves the temporary file behind
    if (std::rename(tmp.c_str(), path.c_str()) != 0)
      throw IOError(cat(path, ": cannot replace with '", tmp, "': ", std::strerror(errno)));
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
}

void copy_file_atomically(const fs::path& from, const fs::path& to) {
  write_file_atomically(to.string(), [&](std::ostream& os) {
    std::ifstream in(from, std::ios::binary);
    check<IOError>(bool(in), from.string(), ": cannot open for reading");
    os << in.rdbuf();
  });
}

}  // namespace qkv
