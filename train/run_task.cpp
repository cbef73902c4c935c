#include "train/run_task.h"

#include "train/anomaly_run.h"
#include "train/lm_run.h"
#include "train/synthetic_run.h"
#include "train/vision_run.h"

namespace qkv::train {

nlohmann::json run_task(const experiment::Run& run, const experiment::RunDir& dir, const std::string& out,
                        bool resume) {
  const std::string& kind = run.config.task.kind;
  if (kind == "synthetic") return run_synthetic(run, dir);
  if (kind == "vision") return run_vision(run, dir);
  if (kind == "anomaly") return run_anomaly(run, dir, std::filesystem::path(out) / "features");
  if (kind == "lm") return run_lm(run, dir, out, resume);
  throw ValueError(cat("task.kind '", kind, "' is not one of synthetic, vision, anomaly, lm"));
}

}  // namespace qkv::train
