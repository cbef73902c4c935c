// An exclusive lock on a folder while one process writes to it (a run folder, a token dataset
// being prepared): flock(2) on <dir>/.qkvlab.lock. The kernel drops the lock when the process
// ends, however it ends, so a killed process never leaves a stale lock behind; the file stays
// and holds the last holder's pid, host, start time and command line, which a process that
// finds the folder locked reports.
#pragma once
#include <cstdio>
#include <filesystem>
#include <string>

namespace qkv {

class FolderLock {
 public:
  // Creates `dir` when missing and takes its lock. When another process holds it: throws IOError
  // naming `what` (e.g. "run folder"), the folder and the holder, or, with `wait`, says so on
  // `log` and waits until it is free.
  FolderLock(const std::filesystem::path& dir, const std::string& what, bool wait = false, std::FILE* log = nullptr);
  ~FolderLock();
  FolderLock(FolderLock&& other) noexcept;
  FolderLock& operator=(FolderLock&&) = delete;
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;

  static std::filesystem::path file(const std::filesystem::path& dir) { return dir / ".qkvlab.lock"; }
  // The holder as recorded in dir's lock file: "pid P on host H since T: COMMAND".
  static std::string holder(const std::filesystem::path& dir);

 private:
  int fd_ = -1;
};

}  // namespace qkv
