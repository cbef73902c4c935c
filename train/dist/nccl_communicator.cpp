#include "train/dist/nccl_communicator.h"

#include "train/dist/mpi_communicator.h"
#include "train/dist/plugin_comm.h"
#include "train/dist/plugin_loader.h"

namespace qkv::dist {

namespace {

// cuda:<local rank>, which this process must be able to use.
Device rank_device(const Communicator& boot) {
  const Device d(DeviceType::cuda, boot.local_rank());
  check<DistError>(cuda_compiled(), "the nccl back end needs the CUDA backend, and this qkvlab was built without it ",
                   "(configure with -DQKV_CUDA=ON where nvcc is installed)");
  const int visible = cuda_device_count();
  check<DistError>(d.index < visible, "rank ", boot.rank(), " is process ", d.index + 1, " of ", boot.local_size(),
                   " on its node and trains on ", d, ", but ", visible,
                   " CUDA device(s) are visible: start at most one rank per GPU on each node (mpirun -np, ",
                   "--map-by), or check CUDA_VISIBLE_DEVICES");
  check_device_usable(d, "the nccl back end");
  return d;
}

qkv_dist_open_args nccl_args(const Options& o, Communicator& boot, const Device& device) {
  qkv_dist_open_args a{};
  a.timeout_seconds = o.timeout_seconds;
  a.job = qkv_dist_info{boot.rank(), boot.size(), boot.local_rank(), boot.local_size()};
  a.device = device.index;
  if (auto* mpi = dynamic_cast<MpiCommunicator*>(&boot)) {
    a.bootstrap = mpi->plugin().table();
    a.bootstrap_comm = mpi->plugin().comm();
  } else {
    check<DistError>(boot.size() == 1, "the nccl back end needs the mpi back end as its bootstrap in a job of ",
                     boot.size(), " ranks, got '", boot.backend(), "'");
  }
  return a;
}

class NcclCommunicator : public Communicator {
 public:
  NcclCommunicator(const Options& o, std::unique_ptr<Communicator> boot)
      : boot_(std::move(boot)),
        device_(rank_device(*boot_)),
        plugin_(load_plugin("nccl"), nccl_args(o, *boot_, device_)) {}

  int rank() const override { return boot_->rank(); }
  int size() const override { return boot_->size(); }
  int local_rank() const override { return boot_->local_rank(); }
  int local_size() const override { return boot_->local_size(); }
  std::string backend() const override { return "nccl"; }

  std::unique_ptr<Work> all_reduce_async(Tensor& t, ReduceOp op, const std::string& what) override {
    check_reducible(t, "nccl", &device_, what);
    return plugin_.all_reduce(t, op, what);
  }
  std::vector<double> all_reduce(std::vector<double> values, ReduceOp op, const std::string& what) override {
    return boot_->all_reduce(std::move(values), op, what);
  }
  using Communicator::all_reduce;
  std::vector<std::string> all_gather(const std::string& mine, const std::string& what) override {
    return boot_->all_gather(mine, what);
  }
  std::string broadcast(const std::string& bytes, int root, const std::string& what) override {
    return boot_->broadcast(bytes, root, what);
  }
  void barrier(const std::string& what) override { boot_->barrier(what); }
  // Prints, aborts NCCL, then stops the job through the bootstrap.
  [[noreturn]] void abort(const std::string& message) override { plugin_.abort(message); }

 private:
  std::unique_ptr<Communicator> boot_;  // declared first: closed after NCCL
  Device device_;
  PluginComm plugin_;
};

}  // namespace

std::unique_ptr<Communicator> make_nccl(const Options& options, std::unique_ptr<Communicator> bootstrap) {
  return std::make_unique<NcclCommunicator>(options, std::move(bootstrap));
}

}  // namespace qkv::dist
