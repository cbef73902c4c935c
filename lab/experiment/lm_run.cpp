#include "lab/experiment/lm_run.h"

#include <vector>

#include "lab/experiment/codec.h"
#include "lab/experiment/config.h"
#include "tensor/error.h"
#include "train/loops/lm_checkpoint.h"

namespace qkv::experiment {

namespace fs = std::filesystem;

LmRunFiles open_lm_run(const fs::path& folder, const std::string& command) {
  const std::string name = folder.string();
  const char* example = "; give a run folder of `qkvlab run`, such as runs/lm/shakespeare/QKV/seed0";
  check<IOError>(fs::is_directory(folder), command, ": ", name, " is not a folder", example);
  const fs::path config = folder / "config.yaml";
  check<IOError>(fs::is_regular_file(config), command, ": ", name, " is not a run folder (no config.yaml)", example);
  const Config c = load_config_file(config.string());
  check<ValueError>(c.kind() == TaskKind::lm, command, ": ", name, " is a ", enum_name(c.kind()), " run (task.kind in ",
                    config.string(), "); only language-model runs (task.kind lm, the GPT) are read");
  LmRunFiles r;
  r.folder = folder;
  r.run = single_run(c, config.string());
  r.config = c.as<LmConfig>();
  const auto checkpoint = loops::latest_checkpoint(folder);
  check<IOError>(checkpoint.has_value(), command, ": ", name,
                 " has no checkpoint (expected checkpoints/step_N.safetensors with its .state.safetensors, "
                 "written at every validation of a language-model run)");
  r.checkpoint = *checkpoint;
  return r;
}

std::optional<fs::path> run_output_root(const LmRunFiles& r) {
  return run_output_root(r.folder, r.config.name, r.run.id);
}

std::optional<fs::path> run_output_root(const fs::path& folder, const std::string& experiment,
                                        const std::string& run_id) {
  fs::path p = fs::absolute(folder).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();  // a trailing '/'
  const fs::path id(run_id);
  std::vector<fs::path> parts(id.begin(), id.end());
  parts.insert(parts.begin(), fs::path(experiment));
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
    if (p.filename() != *it) return std::nullopt;  // moved or renamed: not <out>/<experiment>/<run id>
    p = p.parent_path();
  }
  return p;
}

}  // namespace qkv::experiment
