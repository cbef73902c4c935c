// connect(): which back end a process gets. World size 1 stays `single` and loads nothing.
#include "train/dist/communicator.h"

#include "train/dist/launch_env.h"
#include "train/dist/mpi_communicator.h"
#include "train/dist/nccl_communicator.h"

namespace qkv::dist {

std::unique_ptr<Communicator> connect(const Options& options, bool cuda) {
  std::string backend = options.backend;
  check<DistError>(backend == "auto" || backend == "single" || backend == "mpi" || backend == "nccl",
                   "unknown communication back end '", backend, "': expected auto, single, mpi or nccl");
  check<DistError>(options.timeout_seconds > 0,
                   "the collective timeout (qkvlab run --dist-timeout) must be positive, got ", options.timeout_seconds,
                   " s");
  const LaunchEnv env = launch_env();
  if (backend == "single") {
    check<DistError>(env.size <= 1, "back end 'single' asked for, but the launcher started this process as rank ",
                     env.rank, " of ", env.size, " (", env.launcher,
                     "): every rank would train alone; use auto, mpi or nccl, or start one process");
    return make_single();
  }
  if (backend == "auto") {
    if (env.size <= 1) return make_single();
    backend = cuda ? "nccl" : "mpi";
  }
  if (backend == "mpi") return std::make_unique<MpiCommunicator>(options);
  // nccl: the mpi back end carries its bootstrap when there are several ranks (started only once
  // NCCL can be used at all, so a CPU-only build fails here and not halfway through MPI).
  check<DistError>(cuda_compiled(), "the nccl back end needs the CUDA backend, and this qkvlab was built without it ",
                   "(configure with -DQKV_CUDA=ON where nvcc is installed), or use the mpi back end for CPU training");
  std::unique_ptr<Communicator> boot =
      env.size > 1 ? std::unique_ptr<Communicator>(std::make_unique<MpiCommunicator>(options)) : make_single();
  return make_nccl(options, std::move(boot));
}

}  // namespace qkv::dist
