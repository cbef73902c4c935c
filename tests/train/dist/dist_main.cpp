// dist_collectives' main. One connect() per process (MPI starts once per process), then one of:
//   (no flag)        under mpirun -np 2: the doctest cases of dist_collectives.cpp on both ranks
//   --single         without a launcher: connect() gives `single` and libmpi is not loaded
//   --fault kill     rank 1 SIGKILLs itself in a loop of collectives (rank 0 must be stopped)
//   --fault stall    rank 1 sleeps past the 2 s timeout (rank 0 must time out and abort)
// run_mpi.py runs it and checks the exit status and the lines of both ranks.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include "tests/train/dist/dist_test.h"
#include "train/dist/communicator.h"

namespace qkv::test {

namespace {

std::unique_ptr<dist::Communicator> the_comm;

bool libmpi_mapped() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line))
    if (line.find("libmpi") != std::string::npos || line.find("libqkv_dist_") != std::string::npos) return true;
  return false;
}

int single_mode() {
  auto comm = dist::connect(dist::Options{}, false);
  if (comm->backend() != "single" || comm->size() != 1) {
    std::fprintf(stderr, "FAIL: without a launcher connect() gave '%s' of size %d\n", comm->backend().c_str(),
                 comm->size());
    return 1;
  }
  if (libmpi_mapped()) {
    std::fprintf(stderr, "FAIL: a world-size-1 process loaded libmpi or a communication plugin\n");
    return 1;
  }
  std::printf("world size 1: backend single, no libmpi mapped\n");
  return 0;
}

int fault_mode(const std::string& fault) {
  dist::Options o;
  o.timeout_seconds = fault == "stall" ? 2 : 20;
  the_comm = dist::connect(o, false);
  dist::Communicator& comm = *the_comm;
  const int n = 200;
  for (int i = 0; i < n; ++i) {
    if (comm.rank() == 1 && i == 20) {
      if (fault == "kill") ::raise(SIGKILL);
      if (fault == "stall") std::this_thread::sleep_for(std::chrono::seconds(10));
    }
    Tensor t = from_vector<float>({float(comm.rank()), 1.0f});
    comm.all_reduce(t, dist::ReduceOp::sum, cat("fault loop all_reduce ", i + 1, " of ", n));
  }
  std::printf("rank %d: the fault loop finished, which it must not\n", comm.rank());
  the_comm.reset();
  return 0;
}

}  // namespace

dist::Communicator& comm() { return *the_comm; }

}  // namespace qkv::test

int main(int argc, char** argv) {
  using namespace qkv;
  try {
    if (argc >= 2 && std::strcmp(argv[1], "--single") == 0) return test::single_mode();
    if (argc >= 3 && std::strcmp(argv[1], "--fault") == 0) return test::fault_mode(argv[2]);
    dist::Options o;
    o.timeout_seconds = 20;
    test::the_comm = dist::connect(o, false);
    doctest::Context context(argc, argv);
    context.setOption("no-colors", true);  // mpirun gives the ranks a terminal; run_mpi.py reads the summary
    const int failed = context.run();
    test::the_comm.reset();  // MPI_Finalize
    return failed;
  } catch (const Error& e) {
    std::fprintf(stderr, "dist_collectives: %s\n", e.what());
    return 1;
  }
}
