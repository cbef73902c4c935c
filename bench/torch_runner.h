// The peers a benchmark times beside qkvlab: PyTorch eager, torch.compile and JAX twins of its
// workload (bench/torch_step.py, bench/torch_decode.py, bench/peers/jax_*.py), each run by a
// Python interpreter; and the arguments the twins share.
//
// --peers LIST, comma-separated KIND[@PYTHON]: KIND is torch (eager), torch-compile (inductor) or
// jax (jax.jit); PYTHON is the interpreter (a path, or a name looked up in PATH: python3), "venv"
// for the peers' virtual environment ($QKV_PEERS_VENV, else build/peers-venv: bash
// bench/peers/setup.sh), /usr/bin/python3 (Debian's PyTorch) when omitted. "default": torch, and
// torch@venv, torch-compile@venv and jax@venv when the venv exists; "none": no peers.
//
// The twins are found under the source tree: $QKV_SOURCE_DIR when set (a bundle carried to another
// machine, whose checkout is elsewhere: scripts/gpu-check.sh), else the tree this was built from.
#pragma once
#include <string>
#include <vector>

#include "nn/sharing.h"
#include "tensor/error.h"

namespace qkv::bench {

struct Peer {
  std::string kind;    // torch, torch-compile or jax
  std::string python;  // the interpreter that runs its twin
  std::string spec;    // as given: "jax@venv"
};

// What a twin runs: training steps (torch_step.py and its JAX twin) or decode steps.
enum class Workload { step, decode };

// ValueError for an unknown kind or a missing interpreter.
std::vector<Peer> parse_peers(const std::string& list);

// The command line of a peer's twin for a workload, before its arguments:
// "exec PYTHON SOURCE/bench/torch_step.py --mode compile".
std::string peer_command(const Peer& peer, Workload workload);

// The source tree the twins and experiment files are read from: $QKV_SOURCE_DIR, else the build's.
std::string source_dir();

// "torch (/usr/bin/python3), jax (build/peers-venv/bin/python)": the line benchmarks print.
std::string describe_peers(const std::vector<Peer>& peers);

// The help text of --peers.
inline const char* peers_help() {
  return "peers timed beside qkvlab, KIND[@PYTHON] comma-separated: KIND torch, torch-compile or jax; PYTHON an "
         "interpreter (a path or a name in PATH) or 'venv' (QKV_PEERS_VENV, else build/peers-venv), /usr/bin/python3 "
         "if omitted; 'default': torch, plus the venv's torch, torch-compile and jax when it exists; 'none'";
}

// The twins' --slots argument for a sharing pattern: the slot serving Q, K and V.
inline std::string torch_slots(nn::Sharing s) {
  const nn::SharingPattern& p = nn::sharing_pattern(s);
  return cat(" --slots ", p.slot[0], ",", p.slot[1], ",", p.slot[2]);
}

}  // namespace qkv::bench
