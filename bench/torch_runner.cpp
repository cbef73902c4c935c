#include "bench/torch_runner.h"

#include <omp.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "tensor/error.h"

namespace qkv::bench {

std::optional<nlohmann::json> run_torch_script(const std::string& script, const std::string& args, std::string& why) {
  const std::string cmd = cat("/usr/bin/python3 ", QKV_SOURCE_DIR, "/bench/", script, " ", args, " --threads ",
                              omp_get_max_threads(), " 2>/dev/null");
  std::FILE* p = popen(cmd.c_str(), "r");
  if (!p) {
    why = "cannot start /usr/bin/python3";
    return std::nullopt;
  }
  std::string out;
  char buf[512];
  while (std::fgets(buf, sizeof buf, p)) out += buf;
  const int rc = pclose(p);
  try {
    auto j = nlohmann::json::parse(out);
    if (rc == 0 && j.contains("ms_per_step")) return j;
    why = j.value("error", "PyTorch run failed");
  } catch (const std::exception&) { why = "PyTorch not available (/usr/bin/python3 with python3-torch)"; }
  return std::nullopt;
}

}  // namespace qkv::bench
