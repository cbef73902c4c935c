#include "train/dist/launch_env.h"

#include <cstdlib>
#include <string_view>

#include "tensor/error.h"
#include "train/dist/communicator.h"

namespace qkv::dist {

namespace {

// The variable's value as a count, or -1 when unset or not a number.
int read_int(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return -1;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  return (*end == '\0' && n >= 0 && n < (1L << 30)) ? int(n) : -1;
}

}  // namespace

LaunchEnv launch_env() {
  struct Source {
    const char* size;
    const char* rank;
  };
  static constexpr Source sources[] = {
      {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"},
      {"PMI_SIZE", "PMI_RANK"},
      {"SLURM_STEP_NUM_TASKS", "PMIX_RANK"},  // srun --mpi=pmix
      {"SLURM_NTASKS", "PMIX_RANK"},
      {"MV2_COMM_WORLD_SIZE", "MV2_COMM_WORLD_RANK"},
  };
  for (const Source& s : sources) {
    const int size = read_int(s.size), rank = read_int(s.rank);
    // Slurm's task counts say nothing without PMIx: a plain srun of one program per task is not
    // an MPI job.
    if (size < 0 || (std::string_view(s.rank) == "PMIX_RANK" && rank < 0)) continue;
    return LaunchEnv{size, rank < 0 ? 0 : rank, cat(s.size, "=", size)};
  }
  return LaunchEnv{};
}

bool launched_by_mpi() { return launch_env().size > 1; }

}  // namespace qkv::dist
