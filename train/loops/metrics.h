// The records of metrics.jsonl, one JSON object per line, "record" naming its kind:
//
//   step     epoch loop, every log_every steps and at the last: epoch, step, loss, lr,
//            grad_norm, it_per_s (since the previous line or validation)
//   epoch    epoch loop, after each epoch: epoch, train_loss, val_loss, val_accuracy; without
//            validation (test_last) also test_loss, test_accuracy (a monitor)
//   val      epoch loop, after each validation (train.evals_per_epoch per epoch): epoch
//            (fractional: 1.25 is a quarter into the second epoch), step, val_loss, val_accuracy
//   test     epoch loop, at the end: best_epoch, best_val_accuracy, test_accuracy, test_loss,
//            seconds, data_wait_seconds
//   lm_step  language-model loop, every log_every steps and at the last: step, loss (mean since
//            the last line), lr, grad_norm, skipped, tokens_per_s, mfu (when a peak is known)
//   eval     language-model loop, every eval_every steps: step, val_loss, val_ppl
//   nonfinite both loops, a step whose loss or gradient norm is NaN or inf (nonfinite.h): step,
//            epoch (epoch loop), loss, grad_norm (null when not finite), action (skip or stop),
//            consecutive (non-finite steps in a row, this one included)
//
// Both loops write them through RunLog (run_log.h); read_metrics reads them back, every field
// checked (an IOError names file, line and field).
#pragma once
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace qkv::loops {

struct StepRecord {
  int64_t epoch = 0, step = 0;
  double loss = 0, lr = 0, grad_norm = 0, it_per_s = 0;
  bool operator==(const StepRecord&) const = default;
};
struct EpochRecord {
  int64_t epoch = 0;
  double train_loss = 0, val_loss = 0, val_accuracy = 0;
  // test_last (no validation): the test split after the epoch, a monitor for the curves; the
  // tested weights are the last epoch's all the same.
  std::optional<double> test_loss = std::nullopt, test_accuracy = std::nullopt;
  bool operator==(const EpochRecord&) const = default;
};
struct ValRecord {
  double epoch = 0;  // epochs done when it ran, fractional
  int64_t step = 0;
  double val_loss = 0, val_accuracy = 0;
  bool operator==(const ValRecord&) const = default;
};
struct TestRecord {
  int64_t best_epoch = 0;
  double best_val_accuracy = 0, test_accuracy = 0, test_loss = 0, seconds = 0, data_wait_seconds = 0;
  bool operator==(const TestRecord&) const = default;
};
struct LmStepRecord {
  int64_t step = 0, skipped = 0;
  double loss = 0, lr = 0, grad_norm = 0, tokens_per_s = 0;
  std::optional<double> mfu;
  bool operator==(const LmStepRecord&) const = default;
};
struct EvalRecord {
  int64_t step = 0;
  double val_loss = 0, val_ppl = 0;
  bool operator==(const EvalRecord&) const = default;
};

struct NonfiniteRecord {
  int64_t step = 0;
  std::optional<int64_t> epoch;
  double loss = 0, grad_norm = 0;
  std::string action;  // "skip" or "stop"
  int64_t consecutive = 0;
  bool operator==(const NonfiniteRecord&) const = default;
};

using MetricsRecord =
    std::variant<StepRecord, EpochRecord, TestRecord, LmStepRecord, EvalRecord, NonfiniteRecord, ValRecord>;

nlohmann::json to_json(const MetricsRecord& r);
// IOError naming `where` and the field for a missing, mistyped or unknown record.
MetricsRecord metrics_record_from_json(const nlohmann::json& j, const std::string& where);
// Every record of a metrics.jsonl file, in order; a missing file has none.
std::vector<MetricsRecord> read_metrics(const std::filesystem::path& file);

// Per-kind views of a list of records.
template <class R> std::vector<R> records_of(const std::vector<MetricsRecord>& records) {
  std::vector<R> out;
  for (const MetricsRecord& r : records)
    if (const R* x = std::get_if<R>(&r)) out.push_back(*x);
  return out;
}

}  // namespace qkv::loops
