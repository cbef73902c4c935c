// `qkvlab run --nproc N ...`: the convenience that starts a data-parallel job on this machine by
// running the same command under Open MPI's mpirun, printing the mpirun command line it runs so
// that users learn the real launch (and use it for several nodes or under Slurm).
#pragma once

namespace qkv::cli {

// Replaces this process with `mpirun -np N ... <this command without --nproc>`; adds
// --oversubscribe when N exceeds the cores and --allow-run-as-root as root. Does not return;
// an mpirun that is not installed is an Error saying which package provides it.
[[noreturn]] void relaunch_with_mpirun(int nproc);

}  // namespace qkv::cli
