// The result row of a finished run (result.json in its folder): written by every runner, read by
// every table and figure. Identity (experiment, family, table column, run id, variant, seed,
// grid point, parameters), then the family's metrics: classification (synthetic, vision,
// anomaly: test accuracy at the best-validation checkpoint and the per-epoch curve) or language
// modeling (validation loss and perplexity, throughput, KV-cache bytes, the validation curve).
// Reading checks every field: a missing, mistyped or renamed field is an IOError naming the file
// and the field, never a silent zero.
//
// A run is complete or diverged ("status"; a row without it is complete). A diverged run stopped
// on a NaN or inf loss, gradient norm or validation loss (train.on_nonfinite,
// train.max_consecutive_skips): "divergence" says at which step (and epoch) and why, its curve
// runs up to the stop, and it has no final metrics — test_accuracy and test_loss
// (classification), val_loss, val_ppl and best_val_loss (language models) are absent from the
// file and NaN in the row. Tables count diverged runs apart from the means.
#pragma once
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "lab/experiment/families.h"
#include "train/loops/metrics.h"
#include "train/loops/nonfinite.h"

namespace qkv::experiment {

struct ClassificationResult {
  double test_accuracy = 0, test_loss = 0, best_val_accuracy = 0;
  int64_t best_epoch = 0, steps = 0;
  double seconds = 0, steps_per_second = 0, data_wait_fraction = 0;
  std::vector<loops::EpochRecord> epochs;
  int64_t skipped_steps = 0;  // steps not applied for a non-finite loss or gradient norm
  // train.protocol; all_last has no validation: best_val_accuracy and the epochs' validation
  // fields are NaN (null in the file), best_epoch is the last. Older rows: holdout_best.
  Protocol protocol = Protocol::holdout_best;
  double tested_epoch = 0;  // fractional epoch of the tested weights (older rows: best_epoch)
  // Every validation (train.evals_per_epoch per epoch); older rows: none.
  std::vector<loops::ValRecord> validations = {};
  bool operator==(const ClassificationResult&) const = default;
};

// The shape of a language model, which tells the 300M and 1.2B runs of the paper from others.
struct LmShape {
  int64_t layers = 0, d_model = 0, heads = 0, ffn = 0, context = 0, vocab = 0;
  std::string block = "gpt";  // model.kind: gpt (the study's GPT-2 block) or llama
  bool operator==(const LmShape&) const = default;
};

struct LmResult {
  double val_loss = 0, val_ppl = 0, best_val_loss = 0;
  int64_t steps = 0, skipped_steps = 0, resumed_from = 0;
  double tokens_per_s = 0, mfu = 0, peak_flops = 0, seconds = 0;
  int64_t kv_cache_bytes_per_token_bf16 = 0;
  double kv_cache_reduction = 0;  // vs QKV with the same heads
  std::vector<loops::EvalRecord> evals;
  // Absent in rows written before they were recorded. train_loss: last_interval_train_loss.
  std::optional<LmShape> model = std::nullopt;
  std::optional<double> train_loss = std::nullopt;
  bool operator==(const LmResult&) const = default;
};

// Vision: how many images trained and tested.
struct ImageCounts {
  int64_t train_examples = 0, test_examples = 0;
  bool operator==(const ImageCounts&) const = default;
};
// Anomaly: where the set elements came from, and chance accuracy.
struct SetSource {
  std::string dataset, features;
  double chance = 0;
  // Absent in rows written before they were recorded: the side in pixels of the images the
  // ResNet34 encoded (0: features from a file) and whether its weights came from a file.
  std::optional<int64_t> image_size = std::nullopt;
  std::optional<bool> pretrained = std::nullopt;
  bool operator==(const SetSource&) const = default;
};

struct ResultRow {
  std::string experiment;
  TaskKind kind{};
  std::string task;     // the table column: the synthetic task, the dataset, "anomaly" or "lm"
  std::string run;      // the run id: its folder under <out>/<experiment>/
  std::string variant;  // canonical name
  int seed = 0;
  std::vector<std::pair<std::string, std::string>> point;  // grid key -> value, in id order
  std::string scale;  // the experiment file's scale the run was made at; "" for none (or not recorded)
  int64_t params = 0;
  std::variant<ClassificationResult, LmResult> metrics;
  std::optional<ImageCounts> images;          // vision
  std::optional<SetSource> sets;              // anomaly
  std::optional<loops::Divergence> diverged;  // set: the run stopped as diverged (epoch 0 for lm)
  // train.precision requested and the precision the run computed in ("precision": {"requested",
  // "used"}); absent in rows written before the setting existed.
  std::optional<loops::PrecisionChoice> precision;

  const ClassificationResult* classification() const { return std::get_if<ClassificationResult>(&metrics); }
  const LmResult* lm() const { return std::get_if<LmResult>(&metrics); }
  bool complete() const { return !diverged; }
  bool operator==(const ResultRow&) const = default;
};

// The largest result.json a reader accepts (real ones are a few kB to a few MB with long curves).
constexpr uint64_t kMaxResultBytes = uint64_t(64) << 20;

nlohmann::json to_json(const ResultRow& row);
ResultRow result_from_json(const nlohmann::json& j, const std::string& where);
// A result.json file; IOError naming the file (and field) when it is missing or damaged.
ResultRow read_result_file(const std::filesystem::path& file);
// The mean training loss over the last validation interval: the lm_step records after the
// validation before the last one, up to the last, each weighted by the steps it covers. None
// without a validation or without an lm_step record in that interval.
std::optional<double> last_interval_train_loss(const std::vector<loops::MetricsRecord>& records);

// One line for the console: "test accuracy 0.9812", "val ppl 187.21" or "diverged at step 12: ...".
std::string summary(const ResultRow& row);

}  // namespace qkv::experiment
