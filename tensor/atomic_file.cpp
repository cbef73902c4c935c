#include "tensor/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "tensor/error.h"

namespace qkv {

void write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& write) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw IOError(cat(path, ": cannot write: directory '", dir.string(), "' does not exist"));
  const std::string tmp = cat(path, ".tmp.", ::getpid());
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
    if (std::rename(tmp.c_str(), path.c_str()) != 0)
      throw IOError(cat(path, ": cannot replace with '", tmp, "': ", std::strerror(errno)));
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
}

}  // namespace qkv
