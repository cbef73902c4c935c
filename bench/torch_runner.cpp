#include "bench/torch_runner.h"

#include <omp.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "tensor/error.h"

namespace qkv::bench {

TorchTiming time_torch_step(const std::string& args) {
  const std::string cmd = cat("/usr/bin/python3 ", QKV_SOURCE_DIR, "/bench/torch_step.py ", args, " --threads ",
                              omp_get_max_threads(), " 2>/dev/null");
  TorchTiming t;
  std::FILE* p = popen(cmd.c_str(), "r");
  if (!p) {
    t.note = "cannot start /usr/bin/python3";
    return t;
  }
  std::string out;
  char buf[512];
  while (std::fgets(buf, sizeof buf, p)) out += buf;
  const int rc = pclose(p);
  try {
    auto j = nlohmann::json::parse(out);
    if (rc != 0 || !j.contains("ms_per_step")) {
      t.note = j.value("error", "PyTorch run failed");
      return t;
    }
    t.ms = j["ms_per_step"].get<double>();
    t.note = cat("PyTorch ", j["torch"].get<std::string>(), ", ", j["threads"].get<int>(), " threads");
  } catch (const std::exception&) {
    t.note = "PyTorch not available (/usr/bin/python3 with python3-torch)";
  }
  return t;
}

}  // namespace qkv::bench
