#include "lab/tasks/protocol.h"

#include "lab/tasks/lm.h"
#include "tensor/error.h"

namespace qkv::tasks {

using namespace experiment;

namespace {

std::string schedule_text(const EpochSchedule& s) {
  std::string t(enum_name(s.name));
  if (s.name == ScheduleName::multistep) {
    std::string at;
    for (int m : s.milestones) at += cat(at.empty() ? "" : ", ", m);
    t += cat(" (x", s.gamma, " at epochs ", at, ")");
  }
  if (s.name == ScheduleName::cosine) {
    t += s.warmup_steps > 0 ? cat(" after ", s.warmup_steps, " warmup steps") : cat(" after ", s.warmup, " warmup");
    if (s.min_lr > 0) t += cat(" to ", s.min_lr);
  }
  return t;
}

// cat() prints doubles as %g does: "0.001", "5".
template <class C> std::string epoch_protocol(const C& c) {
  std::string s = cat(c.train.epochs, " epochs, batch ", c.train.batch_size, ", ", enum_name(c.optim.name), " lr ",
                      c.optim.lr, ", ", schedule_text(c.schedule), " schedule, clip ",
                      c.optim.clip > 0 ? cat(c.optim.clip) : std::string("none"), "; ");
  s += c.train.protocol == Protocol::all_last
           ? std::string("the weights after the last epoch tested (the test split monitored every epoch)")
           : cat("the best of ", c.train.evals_per_epoch, " validation(s) per epoch tested");
  s += cat("; precision ", loops::precision_name(c.train.precision));
  return s;
}

}  // namespace

std::string protocol_summary(const Config& c) {
  switch (c.kind()) {
    case TaskKind::lm: return lm_protocol(c.as<LmConfig>());
    case TaskKind::synthetic: return epoch_protocol(c.as<SyntheticConfig>());
    case TaskKind::vision: return epoch_protocol(c.as<VisionConfig>());
    case TaskKind::anomaly: {
      const AnomalyConfig& a = c.as<AnomalyConfig>();
      return cat(epoch_protocol(a), "; sets: ", a.data.train_sets, " training (",
                 a.data.resample ? "drawn anew every epoch" : "drawn once", "), ",
                 a.train.protocol == Protocol::all_last ? std::string() : cat(a.data.val_sets, " validation, "),
                 a.data.test_sets, " test; features ",
                 a.data.standardize ? "standardised" : "as the encoder gives them",
                 a.model.input_dropout > 0 ? cat(", input dropout ", a.model.input_dropout) : std::string());
    }
  }
  throw ValueError("unknown task kind");
}

}  // namespace qkv::tasks
