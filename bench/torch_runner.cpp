#include "bench/torch_runner.h"

#include <unistd.h>

#include <cstdlib>

namespace qkv::bench {

namespace {

std::string venv_dir() {
  const char* env = std::getenv("QKV_PEERS_VENV");
  return env && *env ? std::string(env) : cat(QKV_SOURCE_DIR, "/build/peers-venv");
}

std::string venv_python() { return venv_dir() + "/bin/python"; }

}  // namespace

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
  return cat("exec ", peer.python, " ", QKV_SOURCE_DIR, "/bench/", script,
             peer.kind == "torch-compile" ? " --mode compile" : "");
}

std::string describe_peers(const std::vector<Peer>& peers) {
  std::string out;
  for (const Peer& p : peers) out += cat(out.empty() ? "" : ", ", p.kind, " (", p.python, ")");
  return out.empty() ? "none" : out;
}

}  // namespace qkv::bench
