// The training protocol an experiment runs, in one line: what `qkvlab run --dry-run` prints for
// each experiment, so the values a scale resolves to can be read against the sources without
// data or training.
#pragma once
#include <string>

#include "lab/experiment/config.h"

namespace qkv::tasks {

// The epoch loop's protocol of a synthetic, vision or anomaly config (epochs, batch, optimizer,
// schedule, clipping, which weights are tested, precision; for anomaly the sets and features);
// a language model's is lm_protocol (lm.h), which this returns for one.
std::string protocol_summary(const experiment::Config& c);

}  // namespace qkv::tasks
