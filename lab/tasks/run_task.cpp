#include "lab/tasks/run_task.h"

#include "lab/tasks/anomaly.h"
#include "lab/tasks/lm.h"
#include "lab/tasks/synthetic.h"
#include "lab/tasks/vision.h"
#include "lab/tasks/vision_data.h"
#include "tensor/alloc_purpose.h"

namespace qkv::tasks {

using experiment::TaskKind;

experiment::ResultRow run_task(const experiment::Run& run, const experiment::RunDir& dir,
                               const std::filesystem::path& out, bool resume, dist::Communicator* comm) {
  const AllocationPurpose purpose(cat("running ", run.config.name(), "/", run.id));
  switch (run.config.kind()) {
    case TaskKind::synthetic: return run_synthetic(run, dir, comm);
    case TaskKind::vision: return run_vision(run, dir, comm);
    case TaskKind::anomaly: return run_anomaly(run, dir, out / "features", comm);
    case TaskKind::lm: return run_lm(run, dir, out, resume, comm);
  }
  throw ValueError("unknown task kind");
}

void check_inputs(const experiment::Config& c) {
  switch (c.kind()) {
    case TaskKind::synthetic: return;
    case TaskKind::vision: dataset_folder(c.as<experiment::VisionConfig>().data); return;
    case TaskKind::anomaly: {
      const auto& a = c.as<experiment::AnomalyConfig>();
      if (a.data.features != experiment::FeatureSource::file) dataset_folder(a.data);
      return;
    }
    case TaskKind::lm: check_lm_inputs(c.as<experiment::LmConfig>()); return;
  }
}

}  // namespace qkv::tasks
