#include "bench/torch_runner.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>

namespace qkv::bench {

namespace {

std::string venv_dir() {
  const char* env = std::getenv("QKV_PEERS_VENV");
  return env && *env ? std::string(env) : cat(QKV_SOURCE_DIR, "/build/peers-venv");
}

std::string venv_python() { return venv_dir() + "/bin/python"; }

// A bare interpreter name ("python3") as the first executable of that name in PATH; a path, or a
// name PATH does not hold, as it is (then refused as missing).
std::string resolve_interpreter(const std::string& python) {
  const char* path = std::getenv("PATH");
  if (python.find('/') != std::string::npos || !path) return python;
  std::string dirs = path;
  for (size_t start = 0; start <= dirs.size();) {
    const size_t colon = std::min(dirs.find(':', start), dirs.size());
    const std::string dir = dirs.substr(start, colon - start);
    const std::string candidate = cat(dir.empty() ? "." : dir, "/", python);
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
    start = colon + 1;
  }
  return python;
}

}  // namespace

std::string source_dir() {
  const char* env = std::getenv("QKV_SOURCE_DIR");
  return env && *env ? std::string(env) : std::string(QKV_SOURCE_DIR);
}

std::vector<Peer> parse_peers(const std::string& list) {
  if (list == "none" || list.empty()) return {};
  std::string specs = list;
  if (list == "default") {
    specs = "torch";
    if (access(venv_python().c_str(), X_OK) == 0) specs += ",torch@venv,torch-compile@venv,jax@venv";
  }
  std::vector<Peer> peers;
  size_t start = 0;
  for (;;) {
    const size_t comma = specs.find(',', start);
    const std::string spec = specs.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const size_t at = spec.find('@');
    Peer p{spec.substr(0, at), at == std::string::npos ? "/usr/bin/python3" : spec.substr(at + 1), spec};
    check<ValueError>(p.kind == "torch" || p.kind == "torch-compile" || p.kind == "jax", "--peers: '", spec,
                      "': the kind is torch, torch-compile or jax");
    if (p.python == "venv") p.python = venv_python();
    p.python = resolve_interpreter(p.python);
    check<ValueError>(access(p.python.c_str(), X_OK) == 0, "--peers: '", spec, "': no interpreter ", p.python,
                      p.python == venv_python() ? " (make the venv: bash bench/peers/setup.sh)" : "");
    peers.push_back(p);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return peers;
}

std::string peer_command(const Peer& peer, Workload workload) {
  const char* script = workload == Workload::step ? (peer.kind == "jax" ? "peers/jax_step.py" : "torch_step.py")
                                                  : (peer.kind == "jax" ? "peers/jax_decode.py" : "torch_decode.py");
  return cat("exec ", peer.python, " ", source_dir(), "/bench/", script,
             peer.kind == "torch-compile" ? " --mode compile" : "");
}

std::string describe_peers(const std::vector<Peer>& peers) {
  std::string out;
  for (const Peer& p : peers) out += cat(out.empty() ? "" : ", ", p.kind, " (", p.python, ")");
  return out.empty() ? "none" : out;
}

}  // namespace qkv::bench
