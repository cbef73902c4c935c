// The peers a benchmark times beside qkvlab: PyTorch eager, torch.compile and JAX twins of its
// workload (bench/torch_step.py, bench/torch_decode.py, bench/peers/jax_*.py), each run by a
// Python interpreter; and the arguments the twins share.
//
// --peers LIST, comma-separated KIND[@PYTHON]: KIND is torch (eager), torch-compile (inductor) or
// jax (jax.jit); PYTHON is the interpreter, "venv" for the peers' virtual environment
// ($QKV_PEERS_VENV, else build/peers-venv: bash bench/peers/setup.sh), /usr/bin/python3 (Debian's
// PyTorch) when omitted. "default": torch, and torch@venv, torch-compile@venv and jax@venv when the
// venv exists; "none": no peers.
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

// "torch (/usr/bin/python3), jax (build/peers-venv/bin/python)": the line benchmarks print.
std::string describe_peers(const std::vector<Peer>& peers);

// The help text of --peers.
inline const char* peers_help() {
  return "peers timed beside qkvlab, KIND[@PYTHON] comma-separated: KIND torch, torch-compile or jax; PYTHON an "
         "interpreter or 'venv' (QKV_PEERS_VENV, else build/peers-venv), /usr/bin/python3 if omitted; 'default': "
         "torch, plus the venv's torch, torch-compile and jax when it exists; 'none'";
}

// The twins' --slots argument for a sharing pattern: the slot serving Q, K and V.
inline std::string torch_slots(nn::Sharing s) {
  const nn::SharingPattern& p = nn::sharing_pattern(s);
  return cat(" --slots ", p.slot[0], ",", p.slot[1], ",", p.slot[2]);
}

}  // namespace qkv::bench
