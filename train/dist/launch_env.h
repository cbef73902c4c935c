// Where a process stands in a job, read from its launcher's environment before any library is
// loaded: that is how a world-size-1 run knows it need not load MPI at all.
#pragma once
#include <string>

namespace qkv::dist {

struct LaunchEnv {
  int size = 1;  // 1: no launcher, or a job of one process
  int rank = 0;
  std::string launcher;  // the variable it came from: "OMPI_COMM_WORLD_SIZE=2"; empty when none
};

// Open MPI (OMPI_COMM_WORLD_SIZE/RANK), PMI-1/2 (PMI_SIZE/RANK: MPICH's hydra, srun --mpi=pmi2),
// PMIx under Slurm (PMIX_RANK with SLURM_STEP_NUM_TASKS or SLURM_NTASKS), MVAPICH
// (MV2_COMM_WORLD_SIZE/RANK); the first that is set wins.
LaunchEnv launch_env();

}  // namespace qkv::dist
