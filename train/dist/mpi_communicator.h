// The mpi back end's Communicator: CPU tensors and host values through libqkv_dist_mpi.so. Host
// bytes of any length go as a length exchange and then one fixed-size collective.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "train/dist/communicator.h"
#include "train/dist/plugin_comm.h"

namespace qkv::dist {

class MpiCommunicator : public Communicator {
 public:
  explicit MpiCommunicator(const Options& options);  // loads the plugin and starts MPI

  int rank() const override { return plugin_.info().rank; }
  int size() const override { return plugin_.info().size; }
  int local_rank() const override { return plugin_.info().local_rank; }
  int local_size() const override { return plugin_.info().local_size; }
  std::string backend() const override { return "mpi"; }

  std::unique_ptr<Work> all_reduce_async(Tensor& t, ReduceOp op, const std::string& what) override;
  std::vector<double> all_reduce(std::vector<double> values, ReduceOp op, const std::string& what) override;
  using Communicator::all_reduce;
  std::vector<std::string> all_gather(const std::string& mine, const std::string& what) override;
  std::string broadcast(const std::string& bytes, int root, const std::string& what) override;
  void barrier(const std::string& what) override;
  [[noreturn]] void abort(const std::string& message) override { plugin_.abort(message); }

  // The nccl back end's bootstrap: its unique id and its way to stop the job.
  PluginComm& plugin() { return plugin_; }

 private:
  PluginComm plugin_;
};

}  // namespace qkv::dist
