// The world-size-1 back end: every collective returns its input; no library is loaded.
#include <cstdio>
#include <cstdlib>

#include "train/dist/communicator.h"
#include "train/dist/plugin_comm.h"

namespace qkv::dist {

namespace {

class DoneWork : public Work {
 public:
  void wait() override {}
};

class SingleCommunicator : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int local_rank() const override { return 0; }
  int local_size() const override { return 1; }
  std::string backend() const override { return "single"; }

  // The same rules as the other back ends (on any device), so a mistake shows at world size 1.
  std::unique_ptr<Work> all_reduce_async(Tensor& t, ReduceOp, const std::string& what) override {
    check_reducible(t, "single", nullptr, what);
    return std::make_unique<DoneWork>();
  }
  std::vector<double> all_reduce(std::vector<double> values, ReduceOp, const std::string&) override { return values; }
  using Communicator::all_reduce;
  std::vector<std::string> all_gather(const std::string& mine, const std::string&) override { return {mine}; }
  std::string broadcast(const std::string& bytes, int root, const std::string& what) override {
    check<DistError>(root == 0, "broadcast of ", what, ": root rank ", root, " is not in this job of 1 rank");
    return bytes;
  }
  void barrier(const std::string&) override {}
  [[noreturn]] void abort(const std::string& message) override {
    std::fflush(stdout);
    std::fprintf(stderr, "qkvlab: rank 0: %s\n", message.c_str());
    std::fflush(stderr);
    std::_Exit(1);
  }
};

}  // namespace

std::unique_ptr<Communicator> make_single() { return std::make_unique<SingleCommunicator>(); }

}  // namespace qkv::dist
