// The mpi plugin's SIGTERM/SIGINT handler. When one rank dies, mpirun (or srun) terminates the
// others with SIGTERM; without a word they would vanish mid-collective. The handler writes
//   qkvlab: rank R: stopped by the launcher while in <collective or 'training'>: another rank
//   has ended; the launcher's message names it
// and exits with status 1. It only calls write(2) and _exit(2) on a line prepared beforehand:
// the communication thread prepares one per collective it starts, in a ring of slots, and
// publishes which slot is current with one atomic store.
#pragma once
#include <string>

namespace qkv::dist::plugin {

// Installs the handler for SIGTERM and SIGINT; `rank` goes into every line.
void install_stop_handler(int rank);
// The collective this rank is in now; "" when none (the line then says 'training'). Called by
// the communication thread only.
void set_current_collective(const std::string& what);

}  // namespace qkv::dist::plugin
