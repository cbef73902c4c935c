#include "io/folder_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>

#include "tensor/error.h"

namespace qkv {

namespace fs = std::filesystem;

namespace {

std::string command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!all.empty() && all.back() == '\0') all.pop_back();
  for (char& c : all)
    if (c == '\0' || c == '\n') c = ' ';
  return all.empty() ? "unknown" : all;
}

std::string description() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "unknown");
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char when[32];
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return cat("pid ", ::getpid(), " on host ", host, " since ", when, ": ", command_line(), "\n");
}

}  // namespace

std::string FolderLock::holder(const fs::path& dir) {
  std::ifstream in(file(dir));
  std::string line;
  std::getline(in, line);
  return line.empty() ? "a process that has not yet written its name" : line;
}

FolderLock::FolderLock(const fs::path& dir, const std::string& what, bool wait, std::FILE* log) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  check<IOError>(fs::is_directory(dir), dir.string(), ": cannot create the ", what, ": ", ec.message());
  const std::string path = file(dir).string();
  // O_CLOEXEC: a child process (git, a shell) must not inherit the lock and outlive us holding it.
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  check<IOError>(fd_ >= 0, path, ": cannot open the lock file of the ", what, ": ", std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    if (err != EWOULDBLOCK || !wait) {
      ::close(fd_);
      fd_ = -1;
      if (err != EWOULDBLOCK) throw IOError(cat(path, ": cannot lock the ", what, ": ", std::strerror(err)));
      throw IOError(cat("the ", what, " ", dir.string(), " is in use by another process (", holder(dir),
                        "); wait for it to finish or stop it (", path, " names the holder)"));
    }
    if (log)
      std::fprintf(log, "waiting for the %s %s, in use by %s\n", what.c_str(), dir.string().c_str(),
                   holder(dir).c_str());
    int rc;
    while ((rc = ::flock(fd_, LOCK_EX)) != 0 && errno == EINTR) {}
    if (rc != 0) {
      const int e = errno;
      ::close(fd_);
      fd_ = -1;
      throw IOError(cat(path, ": cannot lock the ", what, ": ", std::strerror(e)));
    }
  }
  const std::string text = description();
  // The holder's description; a failure to write it does not make the lock any less held.
  if (::ftruncate(fd_, 0) == 0 && ::pwrite(fd_, text.data(), text.size(), 0) == ssize_t(text.size())) ::fsync(fd_);
}

FolderLock::FolderLock(FolderLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }

FolderLock::~FolderLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the descriptor releases the lock
}

}  // namespace qkv
