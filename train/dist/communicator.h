// train/dist/ owns data-parallel communication: the Communicator interface the training loops
// use, its back ends and how a process finds its place in a job.
//
// Back ends (none home-made on the wire):
//   single  world size 1; every collective returns its input. Always there; needs no library.
//   mpi     Open MPI (or any MPI): CPU tensors and host values; the bootstrap of nccl. A plugin,
//           libqkv_dist_mpi.so beside the executable, dlopen'ed only when a launcher (mpirun,
//           srun with PMI) started the process, so a world-size-1 run never loads libmpi.
//   nccl    NCCL for CUDA tensors (host values through its mpi bootstrap); libqkv_dist_nccl.so.
//
// Every collective is named (`what`: "gradient bucket 2 of 5 at step 17") and bounded by the
// watchdog timeout: a rank that died, stalled or never joined stops every rank with an error
// naming this rank, the collective and the timeout, never a silent hang.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "tensor/tensor.h"
#include "train/data/shard.h"

namespace qkv::dist {

// The collective that failed or timed out, the rank that saw it, and why.
class DistError : public Error {
 public:
  using Error::Error;
};

enum class ReduceOp { sum, max, min };

// A collective started by all_reduce_async; wait() returns once the result is in the tensor
// (for CUDA tensors: once the device's stream is ordered after it, without blocking the host).
class Work {
 public:
  virtual ~Work() = default;
  virtual void wait() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual int local_rank() const = 0;  // among the ranks on this node: picks cuda:<local_rank>
  virtual int local_size() const = 0;
  virtual std::string backend() const = 0;  // "single", "mpi", "nccl"

  // In place over a contiguous f32, f64 or i64 tensor on a device this back end serves.
  virtual std::unique_ptr<Work> all_reduce_async(Tensor& t, ReduceOp op, const std::string& what) = 0;
  void all_reduce(Tensor& t, ReduceOp op, const std::string& what) { all_reduce_async(t, op, what)->wait(); }

  // Host values (metrics, counts, digests), element-wise over ranks.
  virtual std::vector<double> all_reduce(std::vector<double> values, ReduceOp op, const std::string& what) = 0;
  // Every rank's bytes, indexed by rank (the config and weight digests that every rank checks).
  virtual std::vector<std::string> all_gather(const std::string& mine, const std::string& what) = 0;
  // root's bytes on every rank.
  virtual std::string broadcast(const std::string& bytes, int root, const std::string& what) = 0;
  virtual void barrier(const std::string& what) = 0;

  // Prints "qkvlab: rank R: <message>" and stops every rank of the job (exit status 1).
  [[noreturn]] virtual void abort(const std::string& message) = 0;
};

// What a data-parallel job (null: one process) means for this process: rank 0 alone writes
// files, and each rank takes its shard of every batch.
inline bool is_writer(const Communicator* comm) { return !comm || comm->rank() == 0; }
inline data::Shard shard_of(const Communicator* comm) {
  return comm ? data::Shard{comm->rank(), comm->size()} : data::Shard{};
}

// The job's settings, read before any collective.
struct Options {
  double timeout_seconds = 300;  // the watchdog: longest wait for one collective
  std::string backend = "auto";  // auto | single | mpi | nccl (auto: nccl for CUDA runs, else mpi)
};

// World size 1, no library.
std::unique_ptr<Communicator> make_single();

// True when a launcher started this process as one of several ranks (Open MPI's
// OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_RANK with SLURM_NTASKS, ...).
bool launched_by_mpi();

// The communicator of this process: `single` unless a launcher started it (or `backend` asks for
// one); loads the back end's plugin. A missing plugin or library, or an MPI that cannot start, is
// a DistError saying what to install. `cuda`: the run trains on a GPU (auto picks nccl).
std::unique_ptr<Communicator> connect(const Options& options, bool cuda);

}  // namespace qkv::dist
