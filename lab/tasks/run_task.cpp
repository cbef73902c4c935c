#include "lab/tasks/run_task.h"

#include "lab/tasks/anomaly.h"
#include "lab/tasks/lm.h"
#include "lab/tasks/synthetic.h"
#include "lab/tasks/vision.h"

namespace qkv::tasks {

nlohmann::json run_task(const experiment::Run& run, const experiment::RunDir& dir, const std::string& out,
                        bool resume) {
  const std::string& kind = run.config.task.kind;
  if (kind == "synthetic") return run_synthetic(run, dir);
  if (kind == "vision") return run_vision(run, dir);
  if (kind == "anomaly") return run_anomaly(run, dir, std::filesystem::path(out) / "features");
  if (kind == "lm") return run_lm(run, dir, out, resume);
  throw ValueError(cat("task.kind '", kind, "' is not one of synthetic, vision, anomaly, lm"));
}

}  // namespace qkv::tasks
