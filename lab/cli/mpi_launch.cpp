#include "lab/cli/mpi_launch.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "tensor/error.h"

namespace qkv::cli {
namespace {

// This process's argv, from /proc/self/cmdline (NUL-separated).
std::vector<std::string> own_arguments() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  for (size_t start = 0; start < all.size();) {
    const size_t end = all.find('\0', start);
    args.push_back(all.substr(start, end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return args;
}

bool on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  if (!path) return false;
  std::string dirs = path;
  for (size_t start = 0; start <= dirs.size();) {
    const size_t end = std::min(dirs.find(':', start), dirs.size());
    if (access((dirs.substr(start, end - start) + "/" + program).c_str(), X_OK) == 0) return true;
    start = end + 1;
  }
  return false;
}

}  // namespace

void relaunch_with_mpirun(int nproc) {
  check<ValueError>(on_path("mpirun"), "run --nproc ", nproc,
                    ": mpirun not found on PATH; install Open MPI (Debian: apt install openmpi-bin libopenmpi-dev)");
  std::vector<std::string> cmd = {"mpirun", "-np", std::to_string(nproc)};
  if (unsigned(nproc) > std::thread::hardware_concurrency()) cmd.push_back("--oversubscribe");
  if (geteuid() == 0) cmd.push_back("--allow-run-as-root");
  const std::vector<std::string> own = own_arguments();
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  cmd.push_back(n > 0 ? std::string(self, size_t(n)) : own.at(0));
  for (size_t i = 1; i < own.size(); ++i) {
    if (own[i] == "--nproc") {
      ++i;  // and its value
      continue;
    }
    if (own[i].rfind("--nproc=", 0) == 0) continue;
    cmd.push_back(own[i]);
  }
  std::string line;
  for (const std::string& a : cmd) {
    if (!line.empty()) line += ' ';
    line += a;
  }
  std::printf("qkvlab run --nproc %d: running %s\n", nproc, line.c_str());
  std::fflush(stdout);
  std::vector<char*> argv;
  for (std::string& a : cmd) argv.push_back(a.data());
  argv.push_back(nullptr);
  execvp("mpirun", argv.data());
  throw IOError(cat("run --nproc: cannot start mpirun: ", std::strerror(errno)));
}

}  // namespace qkv::cli
