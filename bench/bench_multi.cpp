// bench_multi: bench_kernels, bench_gpt and bench_decode in one executable, run as the program its
// name says (a link or copy named bench_gpt runs bench_gpt), or named by its first argument
// (`bench_multi gpt --device cuda:0`). The GPU check's bundle holds it once, linked under the three
// names: each program alone would carry its own copy of every CUDA kernel, and the bundle must
// stay under what a device machine takes.
#include <cstdio>
#include <cstring>
#include <string>

#include "bench/bench_programs.h"

namespace {

struct Program {
  const char* name;
  int (*main)(int, char**);
};
constexpr Program kPrograms[] = {{"bench_kernels", bench_kernels_main},
                                 {"bench_gpt", bench_gpt_main},
                                 {"bench_decode", bench_decode_main}};

int run(const std::string& name, int argc, char** argv) {
  for (const Program& p : kPrograms)
    if (name == p.name || "bench_" + name == p.name) return p.main(argc, argv);
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  // Line by line into a pipe too: a run cut short by a timeout keeps what it printed.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const char* slash = std::strrchr(argv[0], '/');
  const int rc = run(slash ? slash + 1 : argv[0], argc, argv);
  if (rc >= 0) return rc;
  if (argc >= 2) {
    const int sub = run(argv[1], argc - 1, argv + 1);
    if (sub >= 0) return sub;
  }
  std::fprintf(stderr,
               "bench_multi: run it as bench_kernels, bench_gpt or bench_decode (a link of that name), or as "
               "`bench_multi kernels|gpt|decode ARGS...`\n");
  return 2;
}
