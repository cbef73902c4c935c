// Device memory on the emulated device is not host memory: the host reads and writes it only
// through the runtime's copies, and a direct access faults as on a GPU, with a message that says
// so (checked in a child process, which the fault ends). Under AddressSanitizer, a kernel that
// runs one element past an allocation stops there.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <string>
#include <vector>

#include "cuda_emu/device_memory.h"

namespace {

// Runs f in a child process with its stderr captured; returns (terminating signal or exit
// status << 8, what it wrote to stderr).
template <class F> std::pair<int, std::string> in_child(F f) {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  std::fflush(nullptr);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {  // no test framework's handlers here: the fault report, then the default
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    close(fds[0]);
    signal(SIGSEGV, SIG_DFL);
    signal(SIGABRT, SIG_DFL);
    qkv::cuda_emu::install_host_access_report();
    f();
    _exit(0);
  }
  close(fds[1]);
  std::string err;
  char buf[512];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) err.append(buf, size_t(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return {WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status) << 8, err};
}

}  // namespace

TEST_CASE("emulated device memory: copies reach it, a host read or write of it faults and says why") {
  float* d = nullptr;
  REQUIRE(cudaMalloc(reinterpret_cast<void**>(&d), 8 * sizeof(float)) == cudaSuccess);
  CHECK(qkv::cuda_emu::is_device_memory(d, 8 * sizeof(float)));
  CHECK_FALSE(qkv::cuda_emu::is_device_memory(d, 9 * sizeof(float)));
  const std::vector<float> up = {1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<float> down(8);
  REQUIRE(cudaMemcpy(d, up.data(), 8 * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess);
  REQUIRE(cudaMemcpy(down.data(), d, 8 * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(down == up);

  const auto [read_end, read_err] = in_child([&] {
    volatile float x = d[3];
    (void)x;
  });
  CHECK(read_end != 0);
  CHECK_MESSAGE(read_err.find("the host read or wrote device memory at") != std::string::npos, read_err);
  const auto [write_end, write_err] = in_child([&] { d[0] = 0; });
  CHECK(write_end != 0);
  CHECK_MESSAGE(write_err.find("is not host memory on a GPU") != std::string::npos, write_err);
  cudaFree(d);
}

#if defined(__SANITIZE_ADDRESS__)
namespace {
__global__ void past_the_end(float* x, int n) { x[n] = 1.0f; }
}  // namespace

TEST_CASE("emulated device memory: a kernel one element past an allocation stops there (AddressSanitizer)") {
  float* d = nullptr;
  REQUIRE(cudaMalloc(reinterpret_cast<void**>(&d), 5 * sizeof(float)) == cudaSuccess);
  const auto [end, err] = in_child([&] { CUDA_EMU_LAUNCH(1, 1, 0, nullptr, past_the_end)(d, 5); });
  CHECK(end != 0);
  CHECK_MESSAGE(err.find("AddressSanitizer") != std::string::npos, err);
  cudaFree(d);
}
#endif
